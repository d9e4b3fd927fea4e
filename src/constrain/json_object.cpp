#include "constrain/json_object.h"

namespace llm::constrain {

// RFC 8259 values under an object at the top. Whitespace is one space, or a
// newline and indentation of bounded length (json_layout.h bounds it by the
// depth at run time; LLM_WHITESPACE_FREE replaces `ws`): JSON allows any
// amount, but a sampled model could otherwise spend its whole budget on
// blanks. Strings: any code point but '"', '\' and
// controls, or an escape.
std::string_view JsonObjectGrammar() {
  return R"GBNF(# any JSON object (llmrt built-in)
root   ::= "{" ws ( member ( "," ws member )* )? "}"
member ::= string ws ":" ws value ws
value  ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( member ( "," ws member )* )? "}"
array  ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
string ::= "\"" char* "\""
char   ::= [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" hex hex hex hex )
hex    ::= [0-9a-fA-F]
number ::= "-"? ( "0" | [1-9] [0-9]{0,15} ) ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )?
ws     ::= ( " " | "\n" " "{0,40} )?
)GBNF";
}

}  // namespace llm::constrain
