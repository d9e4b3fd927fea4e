// The evaluator: walks the syntax tree with a stack of scopes.
//
// Scoping follows jinja2: every for-loop iteration gets a fresh scope (a
// {% set %} inside a loop is gone after the iteration, hence namespace());
// if-blocks share their enclosing scope; a macro sees its arguments, its own
// sets and the template's top-level variables, not its caller's locals.
#include "chat/jinja_template.h"

#include "chat/jinja_builtins.h"
#include "chat/jinja_parser.h"
#include "util/utf8.h"

namespace llm::jinja {
namespace {

class Renderer {
 public:
  Renderer(const Dict& globals, const RenderLimits& limits, std::string* out) : limits_(limits), out_(out) {
    scopes_.push_back(globals);
  }

  // A namespace can be made to hold itself ({% set ns.me = ns %}): empty
  // them all so no reference cycle outlives the render.
  ~Renderer() {
    for (const Value& ns : namespaces_) ns.mutable_dict().items.clear();
  }

  Status ExecBody(const Body& body) {
    for (const NodePtr& n : body) {
      LLM_RETURN_IF_ERROR(Exec(*n));
      if (flow_ != Flow::kNormal) break;
    }
    return Status::Ok();
  }

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Status Step() {
    if (++steps_ > limits_.max_steps) return TemplateError("the template exceeded its evaluation step limit");
    return Status::Ok();
  }

  Status Emit(std::string_view s) {
    if (out_->size() + s.size() > limits_.max_output) return TemplateError("the template's output is too large");
    out_->append(s);
    return Status::Ok();
  }

  Value Lookup(const std::string& name) const {
    for (size_t i = scopes_.size(); i-- > 0;) {
      if (i < macro_base_ && i != 0) continue;  // a caller's locals
      if (const Value* v = scopes_[i].Find(name)) return *v;
    }
    Value v = BuiltinGlobal(name);
    return v.is_undefined() ? Value::Undefined("'" + name + "' is undefined") : v;
  }

  void Assign(const std::string& name, Value v) { scopes_.back().Set(name, std::move(v)); }

  // Binds for-loop / set targets; several targets unpack a sequence.
  Status Bind(const std::vector<std::string>& targets, const Value& v, Dict* scope) {
    if (targets.size() == 1) {
      scope->Set(targets[0], v);
      return Status::Ok();
    }
    LLM_ASSIGN_OR_RETURN(List items, v.is_list() || v.is_string() ? Iterate(v) : StatusOr<List>(List{}));
    if (!v.is_list() && !v.is_string()) return TemplateError(std::string("cannot unpack a ") + v.TypeName());
    if (items.size() != targets.size())
      return TemplateError("expected " + std::to_string(targets.size()) + " values to unpack, got " +
                           std::to_string(items.size()));
    for (size_t i = 0; i < targets.size(); ++i) scope->Set(targets[i], items[i]);
    return Status::Ok();
  }

  Status Exec(const Node& n) {
    LLM_RETURN_IF_ERROR(Step());
    switch (n.kind) {
      case Node::Kind::kData: return Emit(n.text);
      case Node::Kind::kOutput: {
        LLM_ASSIGN_OR_RETURN(Value v, Eval(*n.expr));
        return Emit(v.ToString());
      }
      case Node::Kind::kIf: {
        for (const auto& [cond, body] : n.branches) {
          LLM_ASSIGN_OR_RETURN(Value c, Eval(*cond));
          if (c.Truthy()) return ExecBody(body);
        }
        return ExecBody(n.else_body);
      }
      case Node::Kind::kFor: return ExecFor(n);
      case Node::Kind::kSet: {
        LLM_ASSIGN_OR_RETURN(Value v, Eval(*n.expr));
        if (!n.text.empty()) {
          Value ns = Lookup(n.targets[0]);
          if (!ns.is_namespace()) return TemplateError("cannot assign attribute on non-namespace object");
          if (v.depth() >= kMaxValueDepth) return TemplateError("a namespace cannot hold a namespace");
          ns.mutable_dict().Set(n.text, std::move(v));
          return Status::Ok();
        }
        return Bind(n.targets, v, &scopes_.back());
      }
      case Node::Kind::kSetBlock: {
        std::string buf;
        std::string* saved = out_;
        out_ = &buf;
        Status s = ExecBody(n.body);
        out_ = saved;
        LLM_RETURN_IF_ERROR(s);
        Assign(n.targets[0], Value::String(std::move(buf)));
        return Status::Ok();
      }
      case Node::Kind::kMacro: {
        Function f;
        f.name = n.text;
        f.macro = &n;
        Assign(n.text, Value::MakeFunction(std::move(f)));
        return Status::Ok();
      }
      case Node::Kind::kBreak: flow_ = Flow::kBreak; return Status::Ok();
      case Node::Kind::kContinue: flow_ = Flow::kContinue; return Status::Ok();
      case Node::Kind::kBlock: return ExecBody(n.body);
    }
    return Status::Ok();
  }

  Status ExecFor(const Node& n) {
    LLM_ASSIGN_OR_RETURN(Value seq, Eval(*n.expr));
    List storage;
    const List* list = &storage;  // a list is iterated in place (seq keeps it alive)
    if (seq.is_list()) {
      list = &seq.list();
    } else {
      LLM_ASSIGN_OR_RETURN(storage, Iterate(seq));
    }
    if (n.filter) {
      List kept;
      for (const Value& item : *list) {
        LLM_RETURN_IF_ERROR(Step());
        scopes_.emplace_back();
        Status s = Bind(n.targets, item, &scopes_.back());
        StatusOr<Value> keep = s.ok() ? Eval(*n.filter) : StatusOr<Value>(s);
        scopes_.pop_back();
        if (!keep.ok()) return keep.status();
        if (keep->Truthy()) kept.push_back(item);
      }
      storage = std::move(kept);
      list = &storage;
    }
    const List& items = *list;
    if (items.empty()) return ExecBody(n.else_body);
    // One loop object per loop, advanced in place (as jinja2's LoopContext),
    // and one scope reset per iteration: no allocation per iteration.
    const int64_t len = static_cast<int64_t>(items.size());
    static const char* const kKeys[] = {"index",  "index0", "revindex", "revindex0", "first",    "last",
                                        "length", "depth",  "depth0",   "previtem",  "nextitem", "cycle"};
    Dict loop_init;
    for (const char* k : kKeys) loop_init.items.emplace_back(k, Value());
    for (const Value& item : items)  // previtem/nextitem will hold items: count their depth now
      if (item.depth() > loop_init.items[9].second.depth()) loop_init.items[9].second = item;
    Value loop_value = Value::MakeDict(std::move(loop_init));
    auto& slot = loop_value.mutable_dict().items;
    Dict counter;  // what loop.cycle reads: its own object, so no reference cycle
    counter.Set("index0", Value::Int(0));
    Value cycle_state = Value::MakeDict(std::move(counter));
    Function cycle;
    cycle.name = "loop.cycle";
    cycle.self = cycle_state;
    slot[6].second = Value::Int(len);
    slot[7].second = Value::Int(1);
    slot[8].second = Value::Int(0);
    slot[11].second = Value::MakeFunction(std::move(cycle));
    scopes_.emplace_back();
    Status s;
    for (int64_t i = 0; i < len && s.ok(); ++i) {
      s = Step();
      if (!s.ok()) break;
      slot[0].second = Value::Int(i + 1);
      slot[1].second = Value::Int(i);
      cycle_state.mutable_dict().items[0].second = Value::Int(i);
      slot[2].second = Value::Int(len - i);
      slot[3].second = Value::Int(len - i - 1);
      slot[4].second = Value::Bool(i == 0);
      slot[5].second = Value::Bool(i == len - 1);
      slot[9].second = i > 0 ? items[static_cast<size_t>(i - 1)] : Value();
      slot[10].second = i + 1 < len ? items[static_cast<size_t>(i + 1)] : Value();
      Dict& scope = scopes_.back();
      scope.items.clear();
      scope.items.emplace_back("loop", loop_value);
      s = Bind(n.targets, items[static_cast<size_t>(i)], &scope);
      if (s.ok()) s = ExecBody(n.body);
      Flow f = flow_;
      flow_ = Flow::kNormal;
      if (f == Flow::kBreak) break;
    }
    scopes_.pop_back();
    return s;
  }

  StatusOr<CallArgs> EvalArgs(const Expr& e) {
    CallArgs a;
    for (size_t i = 1; i < e.args.size(); ++i) {
      LLM_ASSIGN_OR_RETURN(Value v, Eval(*e.args[i]));
      a.pos.push_back(std::move(v));
    }
    for (const auto& [k, ex] : e.kwargs) {
      LLM_ASSIGN_OR_RETURN(Value v, Eval(*ex));
      a.kw.emplace_back(k, std::move(v));
    }
    return a;
  }

  StatusOr<Value> CallMacro(const Node& m, const CallArgs& a) {
    if (call_depth_ >= limits_.max_call_depth) return TemplateError("macro calls nested too deeply");
    if (a.pos.size() > m.targets.size())
      return TemplateError("macro '" + m.text + "' takes not more than " + std::to_string(m.targets.size()) +
                           " argument(s)");
    for (const auto& [k, v] : a.kw) {
      bool known = false;
      for (const auto& p : m.targets) known = known || p == k;
      if (!known) return TemplateError("macro '" + m.text + "' takes no keyword argument '" + k + "'");
    }
    Dict scope;
    for (size_t i = 0; i < m.targets.size(); ++i) {
      const Value* v = a.Get(i, m.targets[i]);
      if (v != nullptr) {
        scope.Set(m.targets[i], *v);
      } else if (m.defaults[i]) {
        LLM_ASSIGN_OR_RETURN(Value d, Eval(*m.defaults[i]));
        scope.Set(m.targets[i], std::move(d));
      } else {
        scope.Set(m.targets[i], Value());
      }
    }
    std::string buf;
    std::string* saved_out = out_;
    size_t saved_base = macro_base_;
    scopes_.push_back(std::move(scope));
    macro_base_ = scopes_.size() - 1;
    out_ = &buf;
    ++call_depth_;
    Status s = ExecBody(m.body);
    --call_depth_;
    out_ = saved_out;
    macro_base_ = saved_base;
    scopes_.pop_back();
    flow_ = Flow::kNormal;
    LLM_RETURN_IF_ERROR(s);
    return Value::String(std::move(buf));
  }

  StatusOr<Value> Compare(const std::string& op, const Value& l, const Value& r) {
    if (op == "==") return Value::Bool(Equal(l, r));
    if (op == "!=") return Value::Bool(!Equal(l, r));
    if (op == "in" || op == "not in") {
      LLM_ASSIGN_OR_RETURN(bool in, Contains(r, l));
      return Value::Bool(in == (op == "in"));
    }
    if (l.is_undefined()) return TemplateError(l.str().empty() ? "comparison with an undefined value" : l.str());
    if (r.is_undefined()) return TemplateError(r.str().empty() ? "comparison with an undefined value" : r.str());
    LLM_ASSIGN_OR_RETURN(bool lt, op == "<" || op == ">=" ? Less(l, r) : Less(r, l));
    return Value::Bool(op == "<" || op == ">" ? lt : !lt);
  }

  StatusOr<Value> Eval(const Expr& e) {
    LLM_ASSIGN_OR_RETURN(Value v, EvalExpr(e));
    if (v.depth() > kMaxValueDepth)
      return TemplateError("value nested too deeply (a namespace cannot be put inside a list, dict or namespace)");
    return v;
  }

  StatusOr<Value> EvalExpr(const Expr& e) {
    LLM_RETURN_IF_ERROR(Step());
    switch (e.kind) {
      case Expr::Kind::kLiteral: return e.value;
      case Expr::Kind::kName: return Lookup(e.name);
      case Expr::Kind::kList:
      case Expr::Kind::kTuple: {
        List l;
        for (const ExprPtr& a : e.args) {
          LLM_ASSIGN_OR_RETURN(Value v, Eval(*a));
          l.push_back(std::move(v));
        }
        return e.kind == Expr::Kind::kTuple ? Value::MakeTuple(std::move(l)) : Value::MakeList(std::move(l));
      }
      case Expr::Kind::kDict: {
        Dict d;
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          LLM_ASSIGN_OR_RETURN(Value k, Eval(*e.args[i]));
          if (!k.is_string()) return TemplateError("dict keys must be strings");
          LLM_ASSIGN_OR_RETURN(Value v, Eval(*e.args[i + 1]));
          d.Set(k.str(), std::move(v));
        }
        return Value::MakeDict(std::move(d));
      }
      case Expr::Kind::kUnary: {
        LLM_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0]));
        if (e.name == "not") return Value::Bool(!v.Truthy());
        if (!v.is_number()) return TemplateError(std::string("bad operand type for unary ") + e.name + ": '" + v.TypeName() + "'");
        if (e.name == "+") return v.is_float() ? v : Value::Int(v.as_int());
        if (v.is_float()) return Value::Float(-v.as_double());
        if (v.as_int() == INT64_MIN) return TemplateError("integer overflow in unary -");
        return Value::Int(-v.as_int());
      }
      case Expr::Kind::kBinary: {
        LLM_ASSIGN_OR_RETURN(Value l, Eval(*e.args[0]));
        if (e.name == "and") return l.Truthy() ? Eval(*e.args[1]) : l;
        if (e.name == "or") return l.Truthy() ? l : Eval(*e.args[1]);
        LLM_ASSIGN_OR_RETURN(Value r, Eval(*e.args[1]));
        return BinaryOp(e.name, l, r);
      }
      case Expr::Kind::kCompare: {
        LLM_ASSIGN_OR_RETURN(Value l, Eval(*e.args[0]));
        for (size_t i = 0; i < e.ops.size(); ++i) {
          LLM_ASSIGN_OR_RETURN(Value r, Eval(*e.args[i + 1]));
          LLM_ASSIGN_OR_RETURN(Value ok, Compare(e.ops[i], l, r));
          if (!ok.as_bool()) return ok;
          l = std::move(r);
        }
        return Value::Bool(true);
      }
      case Expr::Kind::kCond: {
        LLM_ASSIGN_OR_RETURN(Value c, Eval(*e.args[1]));
        if (c.Truthy()) return Eval(*e.args[0]);
        return e.args[2] ? Eval(*e.args[2]) : Value();
      }
      case Expr::Kind::kGetAttr: {
        LLM_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0]));
        return GetAttr(obj, e.name);
      }
      case Expr::Kind::kGetItem: {
        LLM_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0]));
        LLM_ASSIGN_OR_RETURN(Value key, Eval(*e.args[1]));
        return GetItem(obj, key);
      }
      case Expr::Kind::kSlice: {
        Value parts[4];
        for (size_t i = 0; i < 4; ++i)
          if (e.args[i]) {
            LLM_ASSIGN_OR_RETURN(parts[i], Eval(*e.args[i]));
          }
        return Slice(parts[0], parts[1], parts[2], parts[3]);
      }
      case Expr::Kind::kCall: {
        LLM_ASSIGN_OR_RETURN(Value callee, Eval(*e.args[0]));
        if (!callee.is_function()) {
          if (callee.is_undefined() && !callee.str().empty()) return TemplateError(callee.str());
          return TemplateError(std::string("'") + callee.TypeName() + "' object is not callable");
        }
        LLM_ASSIGN_OR_RETURN(CallArgs a, EvalArgs(e));
        const Function& f = callee.function();
        if (f.macro != nullptr) return CallMacro(*static_cast<const Node*>(f.macro), a);
        LLM_ASSIGN_OR_RETURN(Value r, CallFunction(f, a));
        if (r.is_namespace()) namespaces_.push_back(r);
        if (r.is_list()) steps_ += r.list().size();  // building a list (range...) is work too
        return r;
      }
      case Expr::Kind::kFilter: {
        LLM_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0]));
        LLM_ASSIGN_OR_RETURN(CallArgs a, EvalArgs(e));
        return ApplyFilter(e.name, v, a);
      }
      case Expr::Kind::kTest: {
        LLM_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0]));
        LLM_ASSIGN_OR_RETURN(CallArgs a, EvalArgs(e));
        LLM_ASSIGN_OR_RETURN(bool r, ApplyTest(e.name, v, a));
        return Value::Bool(r != e.negated);
      }
    }
    return Value();
  }

  const RenderLimits& limits_;
  std::string* out_;
  std::vector<Dict> scopes_;
  size_t macro_base_ = 0;
  Flow flow_ = Flow::kNormal;
  uint64_t steps_ = 0;
  int call_depth_ = 0;
  std::vector<Value> namespaces_;
};

}  // namespace

StatusOr<std::unique_ptr<Template>> Template::Compile(std::string_view source) {
  if (!IsValidUtf8(source)) return Status(LLM_ERR_INVALID_UTF8, "the template is not valid UTF-8");
  LLM_ASSIGN_OR_RETURN(std::unique_ptr<TemplateAst> ast, Parse(source));
  return std::unique_ptr<Template>(new Template(std::move(ast)));
}

StatusOr<std::string> Template::Render(const Dict& globals, const RenderLimits& limits) const {
  std::string out;
  Renderer r(globals, limits, &out);
  LLM_RETURN_IF_ERROR(r.ExecBody(ast_->body));
  return out;
}

}  // namespace llm::jinja
