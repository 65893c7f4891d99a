"""A strict renderer for the subset of Go templates (text/template + Helm/Sprig functions) that
the kuberay-tpu-webhook chart uses, so the chart can be checked where no helm binary exists.

It is not Helm. It implements exactly what the chart's templates use, with Helm's semantics:
trim markers, if/else if/else, with, range, define/include, variables, pipelines, Go
truthiness, values numbers as float64 (printed as Go prints them, 1000000 -> 1e+06), `and`/`or`
short-circuit, and the functions listed in FUNCTIONS. Anything else (an unknown function or
action, a field of nil, printing a map) is an error, never a silent guess, so the test fails
rather than checking something Helm would not produce. `lookup` returns what the caller stubs
(empty by default, as `helm template` does); genCA/genSignedCert return fixed stand-in PEM
text, so certificate generation itself is only exercised by the real-helm test.

It also records (a) which branch of every if/with/range was taken, so a test can demand that a
set of value variants renders every line of every template at least once, and (b) which values
were read, so a test can flag values that no template uses.
"""

import base64
import decimal
import json
import re

import yaml


class TemplateError(Exception):
    """The template is malformed or uses something this renderer (or Helm) cannot evaluate."""


class RenderFail(Exception):
    """The template called `fail` or `required` failed: Helm would stop with this message."""


# ---------------------------------------------------------------------------------------------
# Values: numbers become float64 as in Helm, and reads are recorded.

class VDict(dict):
    """A mapping from values.yaml that knows its dotted path."""

    path = ""


class VList(list):
    path = ""


def wrap_values(obj, path=""):
    """Returns the values tree with Helm's number semantics and path-tagged containers."""
    if isinstance(obj, dict):
        d = VDict((k, wrap_values(v, f"{path}.{k}" if path else k)) for k, v in obj.items())
        d.path = path
        return d
    if isinstance(obj, list):
        lst = VList(wrap_values(v, f"{path}[]") for v in obj)
        lst.path = path
        return lst
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return obj
    if isinstance(obj, (int, float)):
        return float(obj)  # YAML numbers are float64 in Helm's values
    raise TemplateError(f"unsupported value type {type(obj).__name__} at {path}")


def leaf_paths(obj, path=""):
    """Every leaf path of a values tree (empty maps and lists count as leaves)."""
    if isinstance(obj, dict) and obj:
        for k, v in obj.items():
            yield from leaf_paths(v, f"{path}.{k}" if path else k)
    elif isinstance(obj, list) and obj and path:
        yield path  # a list is used or not as a whole
    else:
        yield path


def plain(obj):
    """Plain Python data for YAML/JSON output; integral float64s print as integers, as Go does."""
    if isinstance(obj, dict):
        return {str(k): plain(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [plain(v) for v in obj]
    if isinstance(obj, float) and obj.is_integer() and abs(obj) < 2**53:
        return int(obj)
    return obj


def go_float(f):
    """fmt's %v of a float64: strconv.FormatFloat(f, 'g', -1, 64)."""
    if f == 0:
        return "0"
    sign, digits, exp = decimal.Decimal(repr(f)).normalize().as_tuple()
    ds = "".join(map(str, digits))
    x = len(ds) + exp - 1  # exponent of the first digit
    neg = "-" if sign else ""
    if x < -4 or x >= 6:  # shortest precision decides with 6, as fmt does for %v
        mant = ds[0] + ("." + ds[1:] if len(ds) > 1 else "")
        return f"{neg}{mant}e{'-' if x < 0 else '+'}{abs(x):02d}"
    if x < 0:
        return f"{neg}0.{'0' * (-x - 1)}{ds}"
    if len(ds) <= x + 1:
        return neg + ds + "0" * (x + 1 - len(ds))
    return f"{neg}{ds[:x + 1]}.{ds[x + 1:]}"


def to_text(v):
    """How a template prints a value ({{ v }})."""
    if v is None:
        return ""  # Go prints <no value>; Helm removes it
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return go_float(v)
    if isinstance(v, str):
        return v
    raise TemplateError(f"printing a {type(v).__name__} ({v!r:.60}) gives Go's map/slice syntax;"
                        " use toYaml or toJson")


def truthy(v):
    if v is None or v is False:
        return False
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return v != 0
    if isinstance(v, (str, list, dict)):
        return len(v) > 0
    return True


def go_quote(s):
    return json.dumps(s, ensure_ascii=False)


# ---------------------------------------------------------------------------------------------
# Lexing and parsing.

ACTION = re.compile(r"\{\{(-[ \t\r\n])?(.*?)([ \t\r\n]-)?\}\}", re.S)
TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<str>"(?:[^"\\]|\\.)*")
  | (?P<raw>`[^`]*`)
  | (?P<num>-?\d+(?:\.\d+)?)
  | (?P<decl>:=)
  | (?P<assign>=)
  | (?P<pipe>\|)
  | (?P<lp>\()
  | (?P<rp>\))
  | (?P<comma>,)
  | (?P<var>\$[A-Za-z0-9_]*)
  | (?P<field>(?:\.[A-Za-z_][A-Za-z0-9_]*)+|\.)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
""", re.X)
CHAIN = re.compile(r"(?:\.[A-Za-z_][A-Za-z0-9_]*)+")


class Node:
    def __init__(self, kind, line, **kw):
        self.kind, self.line = kind, line
        self.__dict__.update(kw)


def tokenize(src, where):
    out, pos = [], 0
    while pos < len(src):
        m = TOKEN.match(src, pos)
        if not m:
            raise TemplateError(f"{where}: cannot read {src[pos:pos + 20]!r}")
        pos = m.end()
        kind = m.lastgroup
        if kind == "ws":
            continue
        text = m.group(kind)
        if kind == "var":  # $x.field.chain sticks to the variable
            c = CHAIN.match(src, pos)
            if c:
                text += c.group(0)
                pos = c.end()
        if kind == "rp":
            c = CHAIN.match(src, pos)
            if c:
                out.append(("rp", text))
                out.append(("chain", c.group(0)))
                pos = c.end()
                continue
        out.append((kind, text))
    return out


class ExprParser:
    """pipeline := [$v (:=|=)] command ('|' command)* ; command := operand+"""

    def __init__(self, tokens, where):
        self.t, self.i, self.where = tokens, 0, where

    def peek(self):
        return self.t[self.i] if self.i < len(self.t) else (None, None)

    def take(self):
        tok = self.peek()
        self.i += 1
        return tok

    def pipeline(self, top=False):
        decl = None
        if top and len(self.t) >= 2 and self.t[0][0] == "var" and self.t[1][0] in ("decl", "assign"):
            decl = (self.t[0][1], self.t[1][0])
            self.i = 2
        cmds = [self.command()]
        while self.peek()[0] == "pipe":
            self.take()
            cmds.append(self.command())
        return ("pipeline", decl, cmds)

    def command(self):
        ops = []
        while self.peek()[0] not in (None, "pipe", "rp"):
            ops.append(self.operand())
        if not ops:
            raise TemplateError(f"{self.where}: empty command")
        return ("command", ops)

    def operand(self):
        kind, text = self.take()
        if kind == "str":
            return ("lit", json.loads(text))
        if kind == "raw":
            return ("lit", text[1:-1])
        if kind == "num":
            return ("lit", float(text) if "." in text else int(text))
        if kind == "field":
            return ("field", None, [] if text == "." else text[1:].split("."))
        if kind == "var":
            name, _, rest = text.partition(".")
            return ("field", name, rest.split(".") if rest else [])
        if kind == "lp":
            inner = self.pipeline()
            if self.take()[0] != "rp":
                raise TemplateError(f"{self.where}: missing )")
            if self.peek()[0] == "chain":
                return ("chainof", inner, self.take()[1][1:].split("."))
            return ("paren", inner)
        if kind == "ident":
            if text in ("true", "false"):
                return ("lit", text == "true")
            if text == "nil":
                return ("lit", None)
            return ("func", text)
        raise TemplateError(f"{self.where}: unexpected {text!r}")


def parse_expr(src, where):
    p = ExprParser(tokenize(src, where), where)
    pipe = p.pipeline(top=True)
    if p.i != len(p.t):
        raise TemplateError(f"{where}: unexpected {p.t[p.i][1]!r}")
    return pipe


def parse(source, name):
    """Parses one template file into (nodes, defines)."""
    pieces, pos = [], 0
    for m in ACTION.finditer(source):
        pieces.append(("text", source[pos:m.start()], source.count("\n", 0, m.start()) + 1))
        pieces.append(("action", m, source.count("\n", 0, m.start()) + 1))
        pos = m.end()
    pieces.append(("text", source[pos:], source.count("\n", 0, pos) + 1))
    bare = ACTION.sub("", source)
    if "{{" in bare or "}}" in bare:
        raise TemplateError(f"{name}: unbalanced {{{{ or }}}}")
    # Trim markers.
    for i, (kind, val, line) in enumerate(pieces):
        if kind != "action":
            continue
        if val.group(1) and i > 0:
            pieces[i - 1] = ("text", pieces[i - 1][1].rstrip(" \t\r\n"), pieces[i - 1][2])
        if val.group(3) and i + 1 < len(pieces):
            pieces[i + 1] = ("text", pieces[i + 1][1].lstrip(" \t\r\n"), pieces[i + 1][2])

    defines = {}
    root = Node("list", 1, body=[])
    stack = [root]  # open containers: list, if-branch lists, ...

    def cur():
        return stack[-1].body

    for kind, val, line in pieces:
        where = f"{name}:{line}"
        if kind == "text":
            if val:
                cur().append(Node("text", line, text=val))
            continue
        body = val.group(2).strip()
        if body.startswith("/*"):
            if not body.endswith("*/"):
                raise TemplateError(f"{where}: unterminated comment")
            continue
        word = body.split(None, 1)[0] if body else ""
        rest = body[len(word):].strip()
        if word == "if":
            node = Node("if", line, branches=[(parse_expr(rest, where), [])], else_body=None,
                        where=where)
            cur().append(node)
            stack.append(Node("branch", line, owner=node, body=node.branches[0][1]))
        elif word == "else":
            top = stack.pop()
            if top.kind != "branch":
                raise TemplateError(f"{where}: else outside if/with/range")
            owner = top.owner
            if rest.startswith("if "):
                if owner.kind != "if":
                    raise TemplateError(f"{where}: else if inside {owner.kind}")
                owner.branches.append((parse_expr(rest[3:], where), []))
                stack.append(Node("branch", line, owner=owner, body=owner.branches[-1][1]))
            elif rest:
                raise TemplateError(f"{where}: unsupported else form {rest!r}")
            else:
                owner.else_body = []
                stack.append(Node("branch", line, owner=owner, body=owner.else_body,
                                  is_else=True))
        elif word in ("with", "range"):
            decl_vars = None
            expr = rest
            m = re.match(r"^(\$\w+)(?:\s*,\s*(\$\w+))?\s*:=\s*(.*)$", rest, re.S)
            if word == "range" and m:
                decl_vars = [v for v in (m.group(1), m.group(2)) if v]
                expr = m.group(3)
            node = Node(word, line, pipe=parse_expr(expr, where), body=[], else_body=None,
                        vars=decl_vars, where=where)
            cur().append(node)
            stack.append(Node("branch", line, owner=node, body=node.body))
        elif word == "define":
            if len(stack) != 1:
                raise TemplateError(f"{where}: define inside a block")
            dname = json.loads(rest)
            node = Node("define", line, body=[], where=where)
            if dname in defines:
                raise TemplateError(f"{where}: template {dname!r} defined twice")
            defines[dname] = node
            stack.append(Node("branch", line, owner=node, body=node.body))
        elif word == "end":
            if len(stack) == 1:
                raise TemplateError(f"{where}: end without a block")
            stack.pop()
        elif word in ("template", "block", "break", "continue"):
            raise TemplateError(f"{where}: action {word!r} is not supported by this checker")
        else:
            cur().append(Node("output", line, pipe=parse_expr(body, where), where=where))
    if len(stack) != 1:
        raise TemplateError(f"{name}: {len(stack) - 1} block(s) not closed with end")
    return root.body, defines


# ---------------------------------------------------------------------------------------------
# Evaluation.

def _go_printf(fmt, args, where):
    out, ai = [], 0

    def nxt():
        nonlocal ai
        if ai >= len(args):
            raise TemplateError(f"{where}: printf: missing argument")
        ai += 1
        return args[ai - 1]

    i = 0
    while i < len(fmt):
        c = fmt[i]
        if c != "%":
            out.append(c)
            i += 1
            continue
        verb = fmt[i + 1]
        i += 2
        if verb == "%":
            out.append("%")
        elif verb in "sv":
            out.append(to_text(nxt()))
        elif verb == "d":
            out.append(str(int(nxt())))
        elif verb == "q":
            out.append(go_quote(to_text(nxt())))
        else:
            raise TemplateError(f"{where}: printf verb %{verb} not supported")
    return "".join(out)


def _kind(v):
    if v is None:
        return "nil"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    if isinstance(v, str):
        return "string"
    return "other"


def _eq(a, *bs):
    for b in bs:
        if _kind(a) != _kind(b) and "nil" not in (_kind(a), _kind(b)):
            raise TemplateError(f"eq: incompatible types for comparison ({_kind(a)} and {_kind(b)})")
        if a == b:
            return True
    return False


def _gt(a, b):
    """Go's gt: both operands of one ordered basic kind (int, float or string)."""
    ka, kb = _kind(a), _kind(b)
    if ka not in ("int", "float", "string") or kb not in ("int", "float", "string"):
        raise TemplateError(f"gt: invalid type for comparison ({ka} and {kb})")
    if ka != kb:
        raise TemplateError(f"gt: incompatible types for comparison ({ka} and {kb})")
    return a > b


STAND_IN_PEM = {
    "ca": "-----BEGIN CERTIFICATE-----\nstand-in CA certificate\n-----END CERTIFICATE-----\n",
    "crt": "-----BEGIN CERTIFICATE-----\nstand-in serving certificate\n-----END CERTIFICATE-----\n",
    "key": "-----BEGIN RSA PRIVATE KEY-----\nstand-in key\n-----END RSA PRIVATE KEY-----\n",
}


class Renderer:
    """Renders a chart's templates for one set of values."""

    FUNCTIONS = {"include", "toYaml", "toJson", "fromYaml", "nindent", "indent", "quote",
                 "default", "required", "fail", "printf", "replace", "toString", "int", "add",
                 "eq", "ne", "gt", "not", "and", "or", "has", "list", "concat", "hasKey", "index",
                 "empty", "lookup", "genCA", "genSignedCert", "b64enc"}

    def __init__(self, defines, context, lookup=None, coverage=None, used=None):
        self.defines = defines
        self.context = context
        self.lookup_stub = lookup or {}
        self.coverage = coverage if coverage is not None else set()
        self.used = used if used is not None else set()

    # -- values bookkeeping
    def _mark_all(self, v):
        if isinstance(v, (VDict, VList)) and v.path:
            self.used.add(v.path)
            for p in leaf_paths(v, v.path):
                self.used.add(p)

    def _field(self, obj, name, where):
        if obj is None:
            raise TemplateError(f"{where}: nil pointer evaluating .{name}")
        if not isinstance(obj, dict):
            raise TemplateError(f"{where}: can't evaluate field {name} in {type(obj).__name__}")
        v = obj.get(name)
        if isinstance(obj, VDict):
            path = f"{obj.path}.{name}" if obj.path else name
            if not isinstance(v, (VDict, VList)) or not v:
                self.used.add(path)
        return v

    # -- expressions
    def eval_pipe(self, pipe, dot, scope, where):
        _, decl, cmds = pipe
        val, first = None, True
        for cmd in cmds:
            val = self.eval_cmd(cmd, dot, scope, where, None if first else (val,))
            first = False
        if decl:
            name, how = decl
            if how == "decl":
                scope[-1][name] = val
            else:
                for s in reversed(scope):
                    if name in s:
                        s[name] = val
                        break
                else:
                    raise TemplateError(f"{where}: assignment to undeclared {name}")
            return None
        return val

    def eval_operand(self, op, dot, scope, where):
        kind = op[0]
        if kind == "lit":
            return op[1]
        if kind == "field":
            _, var, chain = op
            if var is None:
                v = dot
            elif var == "$":
                v = scope[0]["$"]
            else:
                for s in reversed(scope):
                    if var in s:
                        v = s[var]
                        break
                else:
                    raise TemplateError(f"{where}: undefined variable {var}")
            for name in chain:
                v = self._field(v, name, where)
            return v
        if kind == "paren":
            return self.eval_pipe(op[1], dot, scope, where)
        if kind == "chainof":
            v = self.eval_pipe(op[1], dot, scope, where)
            for name in op[2]:
                v = self._field(v, name, where)
            return v
        if kind == "func":
            return self.call(op[1], [], dot, scope, where)
        raise TemplateError(f"{where}: bad operand")

    def eval_cmd(self, cmd, dot, scope, where, piped):
        ops = cmd[1]
        if ops[0][0] == "func":
            name = ops[0][1]
            if name in ("and", "or"):  # lazy, as in Go >= 1.18
                args = list(ops[1:])
                thunks = [lambda o=o: self.eval_operand(o, dot, scope, where) for o in args]
                if piped:
                    thunks.append(lambda: piped[0])
                val = None
                for t in thunks:
                    val = t()
                    if (name == "and") != truthy(val):
                        return val
                return val
            args = [self.eval_operand(o, dot, scope, where) for o in ops[1:]]
            if piped:
                args.append(piped[0])
            return self.call(name, args, dot, scope, where)
        if len(ops) != 1 or piped:
            raise TemplateError(f"{where}: can't give arguments to a non-function")
        return self.eval_operand(ops[0], dot, scope, where)

    def call(self, name, a, dot, scope, where):
        if name not in self.FUNCTIONS:
            raise TemplateError(f"{where}: function {name!r} is not supported by this checker")

        def need(n):
            if len(a) != n:
                raise TemplateError(f"{where}: {name} takes {n} arguments, got {len(a)}")

        if name == "include":
            need(2)
            if a[0] not in self.defines:
                raise TemplateError(f"{where}: no template {a[0]!r}")
            return self.render_nodes(self.defines[a[0]].body, a[1], [{"$": a[1]}])
        if name in ("toYaml", "toJson"):
            need(1)
            self._mark_all(a[0])
            if name == "toJson":
                return json.dumps(plain(a[0]), separators=(",", ":"), ensure_ascii=False)
            if a[0] is None:
                return "null"
            return yaml.safe_dump(plain(a[0]), default_flow_style=False, sort_keys=True,
                                  width=10**6).rstrip("\n")
        if name == "fromYaml":
            need(1)
            v = yaml.safe_load(a[0])
            return v if v is not None else {}
        if name in ("nindent", "indent"):
            need(2)
            pad = " " * int(a[0])
            text = pad + to_text(a[1]).replace("\n", "\n" + pad)
            return "\n" + text if name == "nindent" else text
        if name == "quote":
            return " ".join(go_quote(to_text(x)) for x in a)
        if name == "default":
            need(2)
            return a[1] if truthy(a[1]) else a[0]
        if name == "required":
            need(2)
            if a[1] is None or a[1] == "":
                raise RenderFail(a[0])
            return a[1]
        if name == "fail":
            need(1)
            raise RenderFail(to_text(a[0]))
        if name == "printf":
            return _go_printf(a[0], a[1:], where)
        if name == "replace":
            need(3)
            return to_text(a[2]).replace(a[0], a[1])
        if name == "toString":
            need(1)
            return to_text(a[0])
        if name == "int":
            need(1)
            try:
                return int(float(a[0])) if a[0] is not None and a[0] != "" else 0
            except (TypeError, ValueError):
                return 0
        if name == "add":
            return sum(int(float(x)) for x in a)
        if name == "eq":
            return _eq(*a)
        if name == "ne":
            need(2)
            return not _eq(a[0], a[1])
        if name == "gt":
            need(2)
            return _gt(a[0], a[1])
        if name == "not":
            need(1)
            return not truthy(a[0])
        if name == "has":
            need(2)
            self._mark_all(a[1])
            return a[0] in (a[1] or [])
        if name == "list":
            return list(a)
        if name == "concat":
            out = []
            for x in a:
                self._mark_all(x)
                if not isinstance(x, list):
                    raise TemplateError(f"{where}: concat of a non-list")
                out.extend(x)
            return out
        if name == "hasKey":
            need(2)
            return isinstance(a[0], dict) and a[1] in a[0]
        if name == "index":
            v = a[0]
            for k in a[1:]:
                if not isinstance(v, dict):
                    raise TemplateError(f"{where}: index of a non-map")
                v = v.get(k)
            return v
        if name == "empty":
            need(1)
            return not truthy(a[0])
        if name == "lookup":
            need(4)
            return self.lookup_stub.get(tuple(a), {})
        if name == "genCA":
            need(2)
            if not isinstance(a[0], str) or not isinstance(a[1], int):
                raise TemplateError(f"{where}: genCA wants (string, int)")
            return {"Cert": STAND_IN_PEM["ca"], "Key": STAND_IN_PEM["key"]}
        if name == "genSignedCert":
            need(5)
            cn, ips, alts, days, ca = a
            if not (isinstance(cn, str) and (ips is None or isinstance(ips, list))
                    and isinstance(alts, list) and isinstance(days, int)
                    and isinstance(ca, dict) and "Cert" in ca):
                raise TemplateError(f"{where}: genSignedCert wants (cn, ips, alts, days, ca)")
            return {"Cert": STAND_IN_PEM["crt"], "Key": STAND_IN_PEM["key"]}
        if name == "b64enc":
            need(1)
            return base64.b64encode(to_text(a[0]).encode()).decode()
        raise AssertionError(name)

    # -- nodes
    def render_nodes(self, nodes, dot, scope):
        out = []
        for n in nodes:
            if n.kind == "text":
                out.append(n.text)
            elif n.kind == "output":
                v = self.eval_pipe(n.pipe, dot, scope, n.where)
                if n.pipe[1] is None:
                    out.append(to_text(v))
            elif n.kind == "if":
                for i, (cond, body) in enumerate(n.branches):
                    if truthy(self.eval_pipe(cond, dot, scope, n.where)):
                        self.coverage.add((n.where, i))
                        out.append(self.render_nodes(body, dot, scope + [{}]))
                        break
                else:
                    self.coverage.add((n.where, "else"))
                    if n.else_body is not None:
                        out.append(self.render_nodes(n.else_body, dot, scope + [{}]))
            elif n.kind == "with":
                v = self.eval_pipe(n.pipe, dot, scope, n.where)
                if truthy(v):
                    self.coverage.add((n.where, 0))
                    self._mark_all(v)
                    out.append(self.render_nodes(n.body, v, scope + [{}]))
                else:
                    self.coverage.add((n.where, "else"))
                    if n.else_body is not None:
                        out.append(self.render_nodes(n.else_body, dot, scope + [{}]))
            elif n.kind == "range":
                v = self.eval_pipe(n.pipe, dot, scope, n.where)
                self._mark_all(v)
                if isinstance(v, dict):
                    items = [(k, v[k]) for k in sorted(v)]
                elif isinstance(v, list):
                    items = list(enumerate(v))
                elif v is None:
                    items = []
                else:
                    raise TemplateError(f"{n.where}: range over {type(v).__name__}")
                if items:
                    self.coverage.add((n.where, 0))
                    for k, item in items:
                        s = {}
                        if n.vars and len(n.vars) == 2:
                            s[n.vars[0]], s[n.vars[1]] = k, item
                        elif n.vars:
                            s[n.vars[0]] = item
                        out.append(self.render_nodes(n.body, item, scope + [s]))
                else:
                    self.coverage.add((n.where, "else"))
                    if n.else_body is not None:
                        out.append(self.render_nodes(n.else_body, dot, scope + [{}]))
            else:
                raise TemplateError(f"unexpected node {n.kind}")
        return "".join(out)


def branch_points(nodes):
    """Every (where, branch) a complete set of renders must take."""
    for n in nodes:
        if n.kind == "if":
            for i, (_, body) in enumerate(n.branches):
                yield (n.where, i)
                yield from branch_points(body)
            yield (n.where, "else")
            if n.else_body:
                yield from branch_points(n.else_body)
        elif n.kind in ("with", "range"):
            yield (n.where, 0)
            if n.kind == "with" or n.else_body is not None:
                # A range without else renders nothing for an empty list: not a branch of its own.
                yield (n.where, "else")
            yield from branch_points(n.body)
            if n.else_body:
                yield from branch_points(n.else_body)
