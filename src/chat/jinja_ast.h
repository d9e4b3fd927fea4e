// The syntax tree of a parsed template. Immutable after parsing, so one tree
// serves any number of concurrent renders.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja_value.h"

namespace llm::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,   // value
    kName,      // name
    kList,      // args: elements
    kTuple,     // args: elements (a list at run time)
    kDict,      // args: key0, value0, key1, value1...
    kUnary,     // name: "-", "+" or "not"; args[0]
    kBinary,    // name: + - * / // % ** ~ and or; args[0], args[1]
    kCompare,   // ops[i] between args[i] and args[i+1] (chained, as Python)
    kCond,      // args: then, condition, else (else may be null)
    kGetAttr,   // args[0].name
    kGetItem,   // args[0][args[1]]
    kSlice,     // args[0][args[1]:args[2]:args[3]] (missing parts null)
    kCall,      // args[0](args[1..], kwargs)
    kFilter,    // args[0] | name(args[1..], kwargs)
    kTest,      // args[0] is [not] name(args[1..]); negated
  };
  Kind kind = Kind::kLiteral;
  int line = 0;
  Value value;
  std::string name;
  std::vector<std::string> ops;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  bool negated = false;
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

struct Node {
  enum class Kind {
    kData,      // text
    kOutput,    // {{ expr }}
    kIf,        // branches (condition, body); else_body
    kFor,       // for targets in expr [if filter]: body [else else_body]
    kSet,       // set targets = expr, or set target.attr = expr
    kSetBlock,  // {% set name %}body{% endset %}
    kMacro,     // {% macro name(params) %}body{% endmacro %}
    kBreak,
    kContinue,
    kBlock,     // a body rendered in place ({% generation %}, a filter-free call)
  };
  Kind kind = Kind::kData;
  int line = 0;
  std::string text;                  // kData; kSet: attribute ("" = plain); kMacro: name
  ExprPtr expr;                      // kOutput, kFor (iterable), kSet (value)
  ExprPtr filter;                    // kFor: inline `if`
  std::vector<std::string> targets;  // kFor, kSet, kSetBlock: names; kMacro: parameters
  std::vector<ExprPtr> defaults;     // kMacro: parameter defaults (null = required)
  std::vector<std::pair<ExprPtr, Body>> branches;  // kIf
  Body body;                         // kFor, kSetBlock, kMacro, kBlock
  Body else_body;                    // kIf, kFor
};

struct TemplateAst {
  Body body;
};

}  // namespace llm::jinja
