#include "constrain/json_object.h"

namespace llm::constrain {

// RFC 8259 values under an object at the top. Whitespace is at most a
// newline-or-space run of bounded length: JSON allows any amount, but a
// sampled model could otherwise spend its whole budget on blanks (llama.cpp
// bounds it the same way). Strings: any code point but '"', '\' and
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
ws     ::= ( [ \t]{1,2} | "\n" [ \t]{0,20} )?
)GBNF";
}

}  // namespace llm::constrain
