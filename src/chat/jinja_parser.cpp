#include "chat/jinja_parser.h"

#include <initializer_list>

#include "chat/jinja_lexer.h"

namespace llm::jinja {
namespace {

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  StatusOr<std::unique_ptr<TemplateAst>> Run() {
    auto ast = std::make_unique<TemplateAst>();
    std::string end;
    LLM_RETURN_IF_ERROR(ParseBody({}, &ast->body, &end));
    return ast;
  }

 private:
  // --- token helpers -------------------------------------------------------
  const Token& Cur() const { return toks_[pos_]; }
  const Token& Peek(size_t ahead = 1) const {
    return toks_[pos_ + ahead < toks_.size() ? pos_ + ahead : toks_.size() - 1];
  }
  void Next() {
    if (pos_ + 1 < toks_.size()) ++pos_;
  }
  bool IsOp(const char* op) const { return Cur().type == Tok::kOp && Cur().text == op; }
  bool IsName(const char* name) const { return Cur().type == Tok::kName && Cur().text == name; }

  Status Error(const std::string& what) const {
    return InvalidArgument("template syntax error (line " + std::to_string(Cur().line) + "): " + what);
  }
  std::string Describe(const Token& t) const {
    switch (t.type) {
      case Tok::kEof: return "end of template";
      case Tok::kVarEnd: return "'}}'";
      case Tok::kBlockEnd: return "'%}'";
      case Tok::kData: return "text";
      case Tok::kString: return "string";
      default: return "'" + t.text + "'";
    }
  }
  Status ExpectOp(const char* op) {
    if (!IsOp(op)) return Error(std::string("expected '") + op + "', got " + Describe(Cur()));
    Next();
    return Status::Ok();
  }
  Status ExpectBlockEnd() {
    if (Cur().type != Tok::kBlockEnd) return Error("expected '%}', got " + Describe(Cur()));
    Next();
    return Status::Ok();
  }
  StatusOr<std::string> ExpectName() {
    if (Cur().type != Tok::kName) return Error("expected a name, got " + Describe(Cur()));
    std::string n = Cur().text;
    Next();
    return n;
  }

  struct DepthGuard {
    explicit DepthGuard(int* d) : d_(d) { ++*d_; }
    ~DepthGuard() { --*d_; }
    int* d_;
  };
  Status CheckDepth() const {
    return depth_ > kMaxParseDepth ? Error("template nested too deeply") : Status::Ok();
  }

  static ExprPtr Make(Expr::Kind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }

  // --- statements ------------------------------------------------------------

  // Parses nodes until a `{% name` with name in `ends` (consumed up to and
  // including the name; *end = name) or, with no ends, the end of input.
  Status ParseBody(std::initializer_list<const char*> ends, Body* body, std::string* end) {
    DepthGuard g(&depth_);
    LLM_RETURN_IF_ERROR(CheckDepth());
    for (;;) {
      const Token& t = Cur();
      if (t.type == Tok::kEof) {
        if (ends.size() == 0) return Status::Ok();
        return Error(std::string("unexpected end of template; expected '{% ") + *ends.begin() + " %}'");
      }
      if (t.type == Tok::kData) {
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::kData;
        n->line = t.line;
        n->text = t.text;
        body->push_back(std::move(n));
        Next();
      } else if (t.type == Tok::kVarBegin) {
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::kOutput;
        n->line = t.line;
        Next();
        LLM_ASSIGN_OR_RETURN(n->expr, ParseTuple(true, false));
        if (Cur().type != Tok::kVarEnd) return Error("expected '}}', got " + Describe(Cur()));
        Next();
        body->push_back(std::move(n));
      } else if (t.type == Tok::kBlockBegin) {
        Next();
        if (Cur().type != Tok::kName) return Error("expected a statement name, got " + Describe(Cur()));
        for (const char* e : ends) {
          if (Cur().text == e) {
            *end = e;
            Next();
            return Status::Ok();
          }
        }
        NodePtr n;
        LLM_ASSIGN_OR_RETURN(n, ParseStatement());
        body->push_back(std::move(n));
      } else {
        return Error("unexpected " + Describe(t));
      }
    }
  }

  StatusOr<NodePtr> ParseStatement() {
    auto n = std::make_unique<Node>();
    n->line = Cur().line;
    std::string kw = Cur().text;
    Next();
    std::string end;
    if (kw == "if") {
      n->kind = Node::Kind::kIf;
      for (;;) {
        ExprPtr cond;
        LLM_ASSIGN_OR_RETURN(cond, ParseTuple(false, false));
        LLM_RETURN_IF_ERROR(ExpectBlockEnd());
        Body body;
        LLM_RETURN_IF_ERROR(ParseBody({"elif", "else", "endif"}, &body, &end));
        n->branches.emplace_back(std::move(cond), std::move(body));
        if (end != "elif") break;
      }
      if (end == "else") {
        LLM_RETURN_IF_ERROR(ExpectBlockEnd());
        LLM_RETURN_IF_ERROR(ParseBody({"endif"}, &n->else_body, &end));
      }
    } else if (kw == "for") {
      n->kind = Node::Kind::kFor;
      bool paren = IsOp("(");
      if (paren) Next();
      for (;;) {
        std::string name;
        LLM_ASSIGN_OR_RETURN(name, ExpectName());
        n->targets.push_back(std::move(name));
        if (!IsOp(",")) break;
        Next();
      }
      if (paren) LLM_RETURN_IF_ERROR(ExpectOp(")"));
      if (!IsName("in")) return Error("expected 'in' in for loop, got " + Describe(Cur()));
      Next();
      LLM_ASSIGN_OR_RETURN(n->expr, ParseTuple(false, false));
      if (IsName("if")) {
        Next();
        LLM_ASSIGN_OR_RETURN(n->filter, ParseExpression(true));
      }
      if (IsName("recursive")) return Error("recursive for loops are not supported");
      LLM_RETURN_IF_ERROR(ExpectBlockEnd());
      LLM_RETURN_IF_ERROR(ParseBody({"else", "endfor"}, &n->body, &end));
      if (end == "else") {
        LLM_RETURN_IF_ERROR(ExpectBlockEnd());
        LLM_RETURN_IF_ERROR(ParseBody({"endfor"}, &n->else_body, &end));
      }
    } else if (kw == "set") {
      std::string name;
      LLM_ASSIGN_OR_RETURN(name, ExpectName());
      n->targets.push_back(name);
      if (IsOp(".")) {
        Next();
        LLM_ASSIGN_OR_RETURN(n->text, ExpectName());
      } else {
        while (IsOp(",")) {
          Next();
          LLM_ASSIGN_OR_RETURN(name, ExpectName());
          n->targets.push_back(name);
        }
      }
      if (IsOp("=")) {
        Next();
        n->kind = Node::Kind::kSet;
        LLM_ASSIGN_OR_RETURN(n->expr, ParseTuple(true, false));
      } else {
        if (n->targets.size() != 1 || !n->text.empty()) return Error("expected '=' in set");
        n->kind = Node::Kind::kSetBlock;
        LLM_RETURN_IF_ERROR(ExpectBlockEnd());
        return FinishBlock(std::move(n), "endset");
      }
    } else if (kw == "macro") {
      n->kind = Node::Kind::kMacro;
      LLM_ASSIGN_OR_RETURN(n->text, ExpectName());
      LLM_RETURN_IF_ERROR(ExpectOp("("));
      while (!IsOp(")")) {
        if (!n->targets.empty()) LLM_RETURN_IF_ERROR(ExpectOp(","));
        std::string param;
        LLM_ASSIGN_OR_RETURN(param, ExpectName());
        n->targets.push_back(std::move(param));
        ExprPtr def;
        if (IsOp("=")) {
          Next();
          LLM_ASSIGN_OR_RETURN(def, ParseExpression(true));
        }
        n->defaults.push_back(std::move(def));
      }
      Next();
      LLM_RETURN_IF_ERROR(ExpectBlockEnd());
      return FinishBlock(std::move(n), "endmacro");
    } else if (kw == "break" || kw == "continue") {
      n->kind = kw == "break" ? Node::Kind::kBreak : Node::Kind::kContinue;
    } else if (kw == "generation") {
      n->kind = Node::Kind::kBlock;
      LLM_RETURN_IF_ERROR(ExpectBlockEnd());
      return FinishBlock(std::move(n), "endgeneration");
    } else {
      return Error("unknown or unsupported tag '" + kw + "'");
    }
    LLM_RETURN_IF_ERROR(ExpectBlockEnd());
    return n;
  }

  StatusOr<NodePtr> FinishBlock(NodePtr n, const char* end_name) {
    std::string end;
    switch (end_name[3]) {  // the initializer_list needs a literal
      case 's': LLM_RETURN_IF_ERROR(ParseBody({"endset"}, &n->body, &end)); break;
      case 'm': LLM_RETURN_IF_ERROR(ParseBody({"endmacro"}, &n->body, &end)); break;
      default: LLM_RETURN_IF_ERROR(ParseBody({"endgeneration"}, &n->body, &end)); break;
    }
    if (n->kind == Node::Kind::kMacro && Cur().type == Tok::kName) Next();  // {% endmacro name %}
    LLM_RETURN_IF_ERROR(ExpectBlockEnd());
    return n;
  }

  // --- expressions -------------------------------------------------------------

  bool IsTupleEnd() const {
    return Cur().type == Tok::kVarEnd || Cur().type == Tok::kBlockEnd || IsOp(")") || Cur().type == Tok::kEof;
  }

  // Comma-separated expressions; more than one (or a trailing comma) is a tuple.
  StatusOr<ExprPtr> ParseTuple(bool with_condexpr, bool explicit_parens) {
    int line = Cur().line;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    for (;;) {
      if (!items.empty()) LLM_RETURN_IF_ERROR(ExpectOp(","));
      if (IsTupleEnd()) break;
      ExprPtr e;
      LLM_ASSIGN_OR_RETURN(e, ParseExpression(with_condexpr));
      items.push_back(std::move(e));
      if (IsOp(",")) is_tuple = true;
      else break;
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parens) return Error("expected an expression, got " + Describe(Cur()));
    }
    auto t = Make(Expr::Kind::kTuple, line);
    t->args = std::move(items);
    return t;
  }

  StatusOr<ExprPtr> ParseExpression(bool with_condexpr) {
    DepthGuard g(&depth_);
    LLM_RETURN_IF_ERROR(CheckDepth());
    ExprPtr e;
    LLM_ASSIGN_OR_RETURN(e, ParseOr());
    while (with_condexpr && IsName("if")) {
      auto c = Make(Expr::Kind::kCond, Cur().line);
      Next();
      ExprPtr cond;
      LLM_ASSIGN_OR_RETURN(cond, ParseOr());
      ExprPtr otherwise;
      if (IsName("else")) {
        Next();
        LLM_ASSIGN_OR_RETURN(otherwise, ParseExpression(true));
      }
      c->args.push_back(std::move(e));
      c->args.push_back(std::move(cond));
      c->args.push_back(std::move(otherwise));
      e = std::move(c);
    }
    return e;
  }

  StatusOr<ExprPtr> Binary(std::string op, ExprPtr l, ExprPtr r, int line) {
    auto b = Make(Expr::Kind::kBinary, line);
    b->name = std::move(op);
    b->args.push_back(std::move(l));
    b->args.push_back(std::move(r));
    return b;
  }

  StatusOr<ExprPtr> ParseOr() {
    ExprPtr l;
    LLM_ASSIGN_OR_RETURN(l, ParseAnd());
    while (IsName("or")) {
      int line = Cur().line;
      Next();
      ExprPtr r;
      LLM_ASSIGN_OR_RETURN(r, ParseAnd());
      LLM_ASSIGN_OR_RETURN(l, Binary("or", std::move(l), std::move(r), line));
    }
    return l;
  }

  StatusOr<ExprPtr> ParseAnd() {
    ExprPtr l;
    LLM_ASSIGN_OR_RETURN(l, ParseNot());
    while (IsName("and")) {
      int line = Cur().line;
      Next();
      ExprPtr r;
      LLM_ASSIGN_OR_RETURN(r, ParseNot());
      LLM_ASSIGN_OR_RETURN(l, Binary("and", std::move(l), std::move(r), line));
    }
    return l;
  }

  StatusOr<ExprPtr> ParseNot() {
    if (!IsName("not")) return ParseCompare();
    DepthGuard g(&depth_);
    LLM_RETURN_IF_ERROR(CheckDepth());
    auto n = Make(Expr::Kind::kUnary, Cur().line);
    n->name = "not";
    Next();
    ExprPtr operand;
    LLM_ASSIGN_OR_RETURN(operand, ParseNot());
    n->args.push_back(std::move(operand));
    return n;
  }

  StatusOr<ExprPtr> ParseCompare() {
    int line = Cur().line;
    ExprPtr first;
    LLM_ASSIGN_OR_RETURN(first, ParseMath1());
    ExprPtr cmp;
    for (;;) {
      std::string op;
      if (Cur().type == Tok::kOp &&
          (Cur().text == "==" || Cur().text == "!=" || Cur().text == "<" || Cur().text == "<=" ||
           Cur().text == ">" || Cur().text == ">=")) {
        op = Cur().text;
        Next();
      } else if (IsName("in")) {
        op = "in";
        Next();
      } else if (IsName("not") && Peek().type == Tok::kName && Peek().text == "in") {
        op = "not in";
        Next();
        Next();
      } else {
        break;
      }
      if (!cmp) {
        cmp = Make(Expr::Kind::kCompare, line);
        cmp->args.push_back(std::move(first));
      }
      ExprPtr operand;
      LLM_ASSIGN_OR_RETURN(operand, ParseMath1());
      cmp->ops.push_back(std::move(op));
      cmp->args.push_back(std::move(operand));
    }
    return cmp ? std::move(cmp) : std::move(first);
  }

  StatusOr<ExprPtr> ParseMath1() {
    ExprPtr l;
    LLM_ASSIGN_OR_RETURN(l, ParseConcat());
    while (IsOp("+") || IsOp("-")) {
      std::string op = Cur().text;
      int line = Cur().line;
      Next();
      ExprPtr r;
      LLM_ASSIGN_OR_RETURN(r, ParseConcat());
      LLM_ASSIGN_OR_RETURN(l, Binary(op, std::move(l), std::move(r), line));
    }
    return l;
  }

  StatusOr<ExprPtr> ParseConcat() {
    ExprPtr l;
    LLM_ASSIGN_OR_RETURN(l, ParseMath2());
    while (IsOp("~")) {
      int line = Cur().line;
      Next();
      ExprPtr r;
      LLM_ASSIGN_OR_RETURN(r, ParseMath2());
      LLM_ASSIGN_OR_RETURN(l, Binary("~", std::move(l), std::move(r), line));
    }
    return l;
  }

  StatusOr<ExprPtr> ParseMath2() {
    ExprPtr l;
    LLM_ASSIGN_OR_RETURN(l, ParsePow());
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      std::string op = Cur().text;
      int line = Cur().line;
      Next();
      ExprPtr r;
      LLM_ASSIGN_OR_RETURN(r, ParsePow());
      LLM_ASSIGN_OR_RETURN(l, Binary(op, std::move(l), std::move(r), line));
    }
    return l;
  }

  StatusOr<ExprPtr> ParsePow() {
    ExprPtr l;
    LLM_ASSIGN_OR_RETURN(l, ParseUnary(true));
    while (IsOp("**")) {
      int line = Cur().line;
      Next();
      ExprPtr r;
      LLM_ASSIGN_OR_RETURN(r, ParseUnary(true));
      LLM_ASSIGN_OR_RETURN(l, Binary("**", std::move(l), std::move(r), line));
    }
    return l;
  }

  StatusOr<ExprPtr> ParseUnary(bool with_filter) {
    DepthGuard g(&depth_);
    LLM_RETURN_IF_ERROR(CheckDepth());
    ExprPtr node;
    if (IsOp("-") || IsOp("+")) {
      node = Make(Expr::Kind::kUnary, Cur().line);
      node->name = Cur().text;
      Next();
      ExprPtr operand;
      LLM_ASSIGN_OR_RETURN(operand, ParseUnary(false));
      node->args.push_back(std::move(operand));
    } else {
      LLM_ASSIGN_OR_RETURN(node, ParsePrimary());
    }
    LLM_ASSIGN_OR_RETURN(node, ParsePostfix(std::move(node)));
    if (with_filter) {
      LLM_ASSIGN_OR_RETURN(node, ParseFilterExpr(std::move(node)));
    }
    return node;
  }

  StatusOr<ExprPtr> ParsePrimary() {
    const Token& t = Cur();
    int line = t.line;
    if (t.type == Tok::kName) {
      auto e = Make(Expr::Kind::kLiteral, line);
      if (t.text == "true" || t.text == "True") e->value = Value::Bool(true);
      else if (t.text == "false" || t.text == "False") e->value = Value::Bool(false);
      else if (t.text == "none" || t.text == "None") e->value = Value::None();
      else {
        e->kind = Expr::Kind::kName;
        e->name = t.text;
      }
      Next();
      return e;
    }
    if (t.type == Tok::kString) {
      std::string s;
      while (Cur().type == Tok::kString) {  // adjacent literals concatenate
        s += Cur().text;
        Next();
      }
      auto e = Make(Expr::Kind::kLiteral, line);
      e->value = Value::String(std::move(s));
      return e;
    }
    if (t.type == Tok::kInt || t.type == Tok::kFloat) {
      auto e = Make(Expr::Kind::kLiteral, line);
      e->value = t.type == Tok::kInt ? Value::Int(t.int_value) : Value::Float(t.float_value);
      Next();
      return e;
    }
    if (IsOp("(")) {
      Next();
      ExprPtr e;
      LLM_ASSIGN_OR_RETURN(e, ParseTuple(true, true));
      LLM_RETURN_IF_ERROR(ExpectOp(")"));
      return e;
    }
    if (IsOp("[") || IsOp("{")) {
      bool is_list = IsOp("[");
      auto e = Make(is_list ? Expr::Kind::kList : Expr::Kind::kDict, line);
      Next();
      const char* close = is_list ? "]" : "}";
      while (!IsOp(close)) {
        if (!e->args.empty()) {
          LLM_RETURN_IF_ERROR(ExpectOp(","));
          if (IsOp(close)) break;
        }
        ExprPtr item;
        LLM_ASSIGN_OR_RETURN(item, ParseExpression(true));
        e->args.push_back(std::move(item));
        if (!is_list) {
          LLM_RETURN_IF_ERROR(ExpectOp(":"));
          LLM_ASSIGN_OR_RETURN(item, ParseExpression(true));
          e->args.push_back(std::move(item));
        }
      }
      Next();
      return e;
    }
    return Error("unexpected " + Describe(t));
  }

  StatusOr<ExprPtr> ParsePostfix(ExprPtr node) {
    for (;;) {
      int line = Cur().line;
      if (IsOp(".")) {
        Next();
        if (Cur().type == Tok::kName) {
          auto e = Make(Expr::Kind::kGetAttr, line);
          e->name = Cur().text;
          e->args.push_back(std::move(node));
          node = std::move(e);
        } else if (Cur().type == Tok::kInt) {
          auto e = Make(Expr::Kind::kGetItem, line);
          e->args.push_back(std::move(node));
          auto idx = Make(Expr::Kind::kLiteral, line);
          idx->value = Value::Int(Cur().int_value);
          e->args.push_back(std::move(idx));
          node = std::move(e);
        } else {
          return Error("expected an attribute name after '.'");
        }
        Next();
      } else if (IsOp("[")) {
        Next();
        LLM_ASSIGN_OR_RETURN(node, ParseSubscript(std::move(node), line));
        LLM_RETURN_IF_ERROR(ExpectOp("]"));
      } else if (IsOp("(")) {
        LLM_ASSIGN_OR_RETURN(node, ParseCall(std::move(node), Expr::Kind::kCall, ""));
      } else {
        return node;
      }
    }
  }

  StatusOr<ExprPtr> ParseSubscript(ExprPtr target, int line) {
    ExprPtr parts[3];
    bool is_slice = false;
    if (!IsOp(":")) {
      LLM_ASSIGN_OR_RETURN(parts[0], ParseExpression(true));
    }
    if (IsOp(":")) {
      is_slice = true;
      Next();
      if (!IsOp("]") && !IsOp(":")) {
        LLM_ASSIGN_OR_RETURN(parts[1], ParseExpression(true));
      }
      if (IsOp(":")) {
        Next();
        if (!IsOp("]")) {
          LLM_ASSIGN_OR_RETURN(parts[2], ParseExpression(true));
        }
      }
    }
    auto e = Make(is_slice ? Expr::Kind::kSlice : Expr::Kind::kGetItem, line);
    e->args.push_back(std::move(target));
    e->args.push_back(std::move(parts[0]));
    if (is_slice) {
      e->args.push_back(std::move(parts[1]));
      e->args.push_back(std::move(parts[2]));
    }
    return e;
  }

  // `(` args `)` after a callee, filter or test; args[0] is the subject.
  StatusOr<ExprPtr> ParseCall(ExprPtr subject, Expr::Kind kind, std::string name) {
    auto e = Make(kind, Cur().line);
    e->name = std::move(name);
    e->args.push_back(std::move(subject));
    LLM_RETURN_IF_ERROR(ExpectOp("("));
    bool first = true;
    while (!IsOp(")")) {
      if (!first) {
        LLM_RETURN_IF_ERROR(ExpectOp(","));
        if (IsOp(")")) break;
      }
      first = false;
      if (Cur().type == Tok::kName && Peek().type == Tok::kOp && Peek().text == "=") {
        std::string key = Cur().text;
        Next();
        Next();
        ExprPtr v;
        LLM_ASSIGN_OR_RETURN(v, ParseExpression(true));
        e->kwargs.emplace_back(std::move(key), std::move(v));
      } else {
        if (!e->kwargs.empty()) return Error("positional argument after keyword argument");
        ExprPtr v;
        LLM_ASSIGN_OR_RETURN(v, ParseExpression(true));
        e->args.push_back(std::move(v));
      }
    }
    Next();
    return e;
  }

  StatusOr<ExprPtr> ParseFilterExpr(ExprPtr node) {
    for (;;) {
      if (IsOp("|")) {
        Next();
        std::string name;
        LLM_ASSIGN_OR_RETURN(name, ExpectName());
        if (IsOp("(")) {
          LLM_ASSIGN_OR_RETURN(node, ParseCall(std::move(node), Expr::Kind::kFilter, name));
        } else {
          auto f = Make(Expr::Kind::kFilter, Cur().line);
          f->name = std::move(name);
          f->args.push_back(std::move(node));
          node = std::move(f);
        }
      } else if (IsName("is")) {
        Next();
        bool negated = false;
        if (IsName("not")) {
          negated = true;
          Next();
        }
        std::string name;
        LLM_ASSIGN_OR_RETURN(name, ExpectName());
        if (IsOp("(")) {
          LLM_ASSIGN_OR_RETURN(node, ParseCall(std::move(node), Expr::Kind::kTest, name));
        } else {
          auto t = Make(Expr::Kind::kTest, Cur().line);
          t->name = std::move(name);
          t->args.push_back(std::move(node));
          bool arg_start = Cur().type == Tok::kName || Cur().type == Tok::kString || Cur().type == Tok::kInt ||
                           Cur().type == Tok::kFloat || IsOp("[") || IsOp("{");
          if (arg_start && !IsName("else") && !IsName("or") && !IsName("and")) {
            if (IsName("is")) return Error("you cannot chain multiple tests with is");
            ExprPtr arg;
            LLM_ASSIGN_OR_RETURN(arg, ParsePrimary());
            LLM_ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
            t->args.push_back(std::move(arg));
          }
          node = std::move(t);
        }
        node->negated = negated;
      } else if (IsOp("(")) {
        LLM_ASSIGN_OR_RETURN(node, ParseCall(std::move(node), Expr::Kind::kCall, ""));
      } else {
        return node;
      }
    }
  }

  std::vector<Token> toks_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

StatusOr<std::unique_ptr<TemplateAst>> Parse(std::string_view source) {
  std::vector<Token> tokens;
  LLM_ASSIGN_OR_RETURN(tokens, Lex(source));
  return Parser(std::move(tokens)).Run();
}

}  // namespace llm::jinja
