"""Reading the IR text that `ir/printer.py` writes back into IR: `parse_kernel(text, env)`.

Why this module is long: it holds the grammar of every statement kind (one branch each in
`_Parser._build`, in the order of the printer's `_fmt`), so that the two read side by side;
split, a statement's spelling would live in three places.

The format, by example (tests/ir/test_roundtrip.py parses this one)::

    kernel k(f32, i64) -> (f32) offloaded {
      task serial
      $0 = arg f32 0
      $1 = const i32 0
      $2 = const i32 8
      $3 = global_ptr f32 @s []
      task range_for
      $4 : parallel_for $1 .. $2 block_dim=128 reduce=[add $3]
        $5 = loop_index i32 $4
        $6 = global_ptr f32 @v[1] [$5]
        $7 = global_load f32 $6
        if $7
          $8 = call f#0($7)
          $9 = result f32 $8[0]
          $10 = atomic_add f32 $3 $9
        else
          global_store $6 $0                    # k.py:12
      task serial
      return[0] $0
    }
    function f#0(f32) -> (f32) {
      $0 = func_arg f32 0
      return_from_function $0
    }

- The header gives the argument types and the return types; `offloaded` when the offload
  pass has split the body into tasks, each starting at a `task serial|range_for` line. The
  real functions the kernel calls follow it (`name#k`: specialization k of `name`; `ref f32`
  for a `ti.ref` parameter).
- A line is one statement; the statements a statement owns (the body of a `for`, `while`,
  the branches of an `if`) follow it, indented further; `else` (or `.name`, for other blocks)
  at the statement's own indentation starts its next block.
- `$N` names a statement; names are per body (the kernel's, each function's) and need not be
  in order or dense: the printer renumbers. `$N : for ...` names a loop (its `loop_index`
  refers to it).
- Each statement's spelling is in the printer (`_BodyPrinter._fmt`); the type follows the
  operation name (`load f32 $1`, `const i32 7`), operands are `$N` or lists `[$1, $2]`, and
  optional attributes come last as `key=value` (`block_dim=128`, `component=2`, `error=0`).
  A statement class with no spelling of its own is written `!ClassName type name=value ...`.
- Fields and ndarray arguments are `@name` (quoted as `@"field(8,)"` when not a plain word);
  the parser finds them in `env`: name -> field (or one of its places) or array argument. A
  name may be followed by `[c]` for component `c` of a vector / matrix field.
- Lines before the statements of the body record what passes put on the kernel: `stop_grad
  @x` (in any block: `ti.stop_grad(x)`), `private_copies threads=N`, `private_field @f`,
  `private_array @a trips=$b..$e adds=N`, `scratch @s f32[4, 16] copies=@x` (a scratch buffer a
  pass requested, ir/scratch.py; the buffer comes from the environment), `tape_log_capacity N`.
- A struct-for (before passes/lower_struct_for.py lowers it) names what it iterates over
  and its index space: `$3 : parallel_struct_for i32 @x [(0, 8), (-2, 3)] grouped
  block_dim=64`; `$4 = struct_index i32 $3[1]` is its index along dimension 1. An SNode
  is `@name` from the environment, as a field is.
- An ndrange-for (before the same pass lowers it) gives its bounds per dimension, each an
  int or a `$name` of the index type: `$5 : parallel_ndrange_for i32 [(-2, $3), (0, 4)]
  grouped block_dim=64`; its indices are `struct_index`es too.
- `# ...` after a statement is its source location (`k.py:12`); a line of its own starting
  with `#` is a comment. Types are data type names (`f32`, `u1`), `none` for no type.

Not in the text: the kernel's table of error messages (assert codes are), what the frontend
keeps on the kernel for itself (its return spec, where a struct-for's checks go in the error
table), and field layouts (the env holds them). The parser checks names, arity and
indentation, and raises ParseError naming the line.
"""
from __future__ import annotations

import ast
import json
import re

from fluxion.ir import ops
from fluxion.ir import stmts as S
from fluxion.ir import types as T
from fluxion.ir.scratch import ScratchBuffer


class ParseError(ValueError):
    pass


class TextLoc:
    """A source location read from the text (`k.py:12`): prints as it was written."""
    __slots__ = ("text", "file", "line", "col", "end_line", "end_col", "func", "source_line",
                 "header_end")

    def __init__(self, text):
        self.text = text
        file, _, line = text.rpartition(":")
        self.file = file or text
        self.line = int(line) if line.isdigit() else None
        self.col = self.end_line = self.end_col = self.func = self.source_line = None
        self.header_end = None

    def __repr__(self):
        return self.text


_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<func>(?:[A-Za-z_][\w.]*|"(?:[^"\\]|\\.)*")\#\d+)
  | (?P<comment>\#.*)
  | (?P<val>\$\??\d+)
  | (?P<glob>@(?:"(?:[^"\\]|\\.)*"|[A-Za-z_][\w.:\-]*)(?:\[\d+\])?)
  | (?P<str>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
  | (?P<num>-?(?:inf|nan)\b|-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)
  | (?P<name>[A-Za-z_!][\w.]*|\.[A-Za-z_]\w*)
  | (?P<punct>\.\.|->|[()\[\],=:{}])
""", re.VERBOSE)

_UNARY = {str(op) for op in ops.UNARY}
_BINARY = {str(op) for op in ops.BINARY + ops.BINARY_INTERNAL}


def _tokens(line, lineno):
    out, pos, comment = [], 0, None
    for m in _TOKEN.finditer(line):
        if m.start() != pos:
            break
        kind = m.lastgroup
        if kind == "comment":
            return out, m.group()[1:].strip()
        if kind != "ws":
            out.append((kind, m.group()))
        pos = m.end()
    if pos != len(line):
        raise ParseError(f"line {lineno}: cannot read {line[pos:]!r}")
    return out, comment


class _Ref:
    """A `$N` before the statement it names is known (resolved when the body is done)."""
    __slots__ = ("name", "lineno")

    def __init__(self, name, lineno):
        self.name, self.lineno = name, lineno


class _Line:
    def __init__(self, lineno, indent, toks, comment):
        self.lineno, self.indent, self.toks, self.comment = lineno, indent, toks, comment
        self.pos = 0

    def error(self, msg):
        return ParseError(f"line {self.lineno}: {msg}")

    def peek(self, k=0):
        p = self.pos + k
        return self.toks[p] if p < len(self.toks) else (None, None)

    def next(self, kind=None, value=None):
        tok = self.peek()
        if tok[0] is None or (kind and tok[0] != kind) or (value and tok[1] != value):
            want = value or kind or "more"
            raise self.error(f"expected {want}, found {tok[1] or 'the end of the line'}")
        self.pos += 1
        return tok[1]

    def accept(self, kind=None, value=None):
        tok = self.peek()
        if tok[0] is not None and (kind is None or tok[0] == kind) and \
                (value is None or tok[1] == value):
            self.pos += 1
            return tok[1]
        return None

    def done(self):
        return self.pos >= len(self.toks)

    def end(self):
        if not self.done():
            raise self.error(f"unexpected {self.peek()[1]!r}")


def parse_kernel(text, env=None):
    """The Kernel that `text` (as `print_kernel` writes it) describes; `env` maps the names of
    fields and arrays to them."""
    return _Parser(text, env or {}).kernel()


class _Parser:
    def __init__(self, text, env):
        self.env = env
        self.lines = []
        base = 0
        for k, raw in enumerate(text.splitlines(), 1):
            if not raw.strip() or raw.strip().startswith("#"):
                continue
            toks, comment = _tokens(raw, k)
            indent = len(raw) - len(raw.lstrip(" "))
            if not self.lines:
                base = indent       # text indented as a whole (in a test's string) reads alike
            if indent < base:
                raise ParseError(f"line {k}: indented less than the kernel's first line")
            self.lines.append(_Line(k, indent - base, toks, comment))
        self.functions = {}

    # -- sections -----------------------------------------------------------------------------
    def kernel(self):
        if not self.lines:
            raise ParseError("no kernel in the text")
        sections, cur = [], None
        for ln in self.lines:
            if ln.indent == 0 and ln.toks and ln.toks[0] == ("punct", "}"):
                if cur is None:
                    raise ln.error("'}' closes nothing")
                sections.append(cur)
                cur = None
            elif cur is None:
                cur = (ln, [])
            else:
                cur[1].append(ln)
        if cur is not None:
            raise cur[0].error("no closing '}'")
        head, body = sections[0]
        for fhead, _ in sections[1:]:
            self._function_header(fhead)
        head.next("name", "kernel")
        name = self._label(head)
        arg_types = self._types(head)
        ret_types = self._types(head) if head.accept("punct", "->") else ()
        offloaded = bool(head.accept("name", "offloaded"))
        head.next("punct", "{")
        head.end()
        kernel = S.Kernel(name, arg_types, ret_types)
        tasks = self._body(body, kernel.body, kernel)
        kernel.tasks = tasks if offloaded else None
        if tasks and not offloaded:
            raise head.error("tasks in a kernel not marked 'offloaded'")
        kernel.functions = list(self.functions.values())
        for (fhead, fbody), f in zip(sections[1:], kernel.functions):
            self._body(fbody, f.body, None)
        return kernel

    def _label(self, ln):
        tok = ln.next()
        if tok[0] == '"':
            return json.loads(tok)
        return tok

    def _types(self, ln):
        ln.next("punct", "(")
        out = []
        while not ln.accept("punct", ")"):
            if out:
                ln.next("punct", ",")
            out.append(self._type(ln))
        return out

    def _type(self, ln):
        name = ln.next("name")
        if name == "none":
            return None
        try:
            return T.by_name(name)
        except KeyError:
            raise ln.error(f"unknown type {name!r}") from None

    def _function_header(self, ln):
        ln.next("name", "function")
        label = ln.next("func")
        params, refs = [], []
        ln.next("punct", "(")
        while not ln.accept("punct", ")"):
            if params:
                ln.next("punct", ",")
            refs.append(bool(ln.accept("name", "ref")))
            params.append(self._type(ln))
        rets = self._types(ln) if ln.accept("punct", "->") else []
        ln.next("punct", "{")
        ln.end()
        base = label.rsplit("#", 1)[0]
        name = json.loads(base) if base.startswith('"') else base
        f = S.Function(name, params, refs, rets,
                       loc=TextLoc(ln.comment) if ln.comment else None)
        if label in self.functions:
            raise ln.error(f"function {label} defined twice")
        self.functions[label] = f
        return f

    # -- bodies -------------------------------------------------------------------------------
    def _body(self, lines, body, kernel):
        """Statements of one body, nested by indentation; returns the tasks it marks."""
        self.names = {}
        stack = [(None, body)]     # (indentation, block)
        pending = None             # (block, owner) a deeper line goes into
        last = {}                  # indentation -> last statement owning blocks there
        tasks, task_kind = [], None
        for ln in lines:
            if stack[0][0] is None:
                stack[0] = (ln.indent, body)
            if ln.indent > stack[-1][0]:
                if pending is None:
                    raise ln.error("indented, but the line before owns no block")
                stack.append((ln.indent, pending))
            else:
                while stack[-1][0] > ln.indent:
                    stack.pop()
                if stack[-1][0] != ln.indent:
                    raise ln.error("indentation matches no enclosing block")
            pending = None
            block = stack[-1][1]
            first = ln.peek()
            if first == ("name", "else") or (first[0] == "name" and first[1].startswith(".")):
                owner = last.get(ln.indent)
                if owner is None or not block.stmts or block.stmts[-1] is not owner:
                    raise ln.error(f"{first[1]!r} follows no statement with blocks")
                bname = "else_block" if first[1] == "else" else first[1][1:]
                if bname not in owner.BLOCKS:
                    raise ln.error(f"{type(owner).__name__} has no block {bname!r}")
                ln.next()
                ln.end()
                pending = getattr(owner, bname)
                continue
            if first == ("name", "stop_grad"):
                ln.next()
                targets = [self._global(ln, want="field")]
                while ln.accept("punct", ","):
                    targets.append(self._global(ln, want="field"))
                ln.end()
                block.stop_gradients = tuple(block.stop_gradients) + tuple(targets)
                continue
            if block is body and kernel is not None and self._kernel_meta(ln, kernel):
                continue
            if first == ("name", "task") and block is body and kernel is not None:
                ln.next()
                task_kind = ln.next("name")
                ln.end()
                tasks.append((task_kind, []))
                continue
            s = self._stmt(ln)
            block.append(s)
            if block is body and tasks:
                tasks[-1][1].append(s)
            if s.BLOCKS:
                last[ln.indent] = s
                pending = getattr(s, s.BLOCKS[0])
                if pending is None:
                    pending = S.Block(s)
                    setattr(s, s.BLOCKS[0], pending)
        self._resolve(body, kernel)
        out = []
        for kind, group in tasks:
            if kind == "range_for":
                if len(group) != 1 or not isinstance(group[0], S.RangeForStmt):
                    raise ParseError(f"a range_for task holds one loop, not {len(group)} "
                                     f"statements")
                out.append((kind, group[0]))
            else:
                out.append((kind, group))
        return out

    def _kernel_meta(self, ln, kernel):
        head = ln.peek()[1]
        if head == "private_copies":
            ln.next()
            kernel.private_copies = True
            kernel.private_threads = self._kw_int(ln, "threads")
        elif head == "private_field":
            ln.next()
            kernel.private_fields.append(self._global(ln, want="field"))
        elif head == "scratch":
            ln.next()
            kernel.scratch.append(self._global(ln, want="field"))
            while not ln.done():        # its type, shape and copies: shown for the reader
                ln.next()
        elif head == "private_array":
            ln.next()
            arg = self._global(ln, want="field")
            grad = bool(ln.accept("name", "grad"))
            ln.next("name", "trips")
            ln.next("punct", "=")
            begin = self._operand(ln)
            ln.next("punct", "..")
            end = self._operand(ln)
            adds = self._kw_int(ln, "adds")
            kernel.private_arrays.append((arg, grad))
            kernel.private_trips.append((begin, end, adds))
        elif head == "tape_log_capacity":
            ln.next()
            kernel.tape_log_capacity = int(ln.next("num"))
        else:
            return False
        ln.end()
        return True

    def _kw_int(self, ln, key):
        ln.next("name", key)
        ln.next("punct", "=")
        return int(ln.next("num"))

    def _resolve(self, body, kernel):
        def fix(v):
            if isinstance(v, _Ref):
                s = self.names.get(v.name)
                if s is None:
                    raise ParseError(f"line {v.lineno}: {v.name} is not defined in this body")
                return s
            if isinstance(v, list):
                return [fix(x) for x in v]
            if isinstance(v, tuple):
                return tuple(fix(x) for x in v)
            return v

        for s in S.walk(body):
            for name in s.OPERANDS + s.ATTRS:
                setattr(s, name, fix(getattr(s, name)))
        if kernel is not None:
            kernel.private_trips = fix(kernel.private_trips)

    # -- statements ---------------------------------------------------------------------------
    def _operand(self, ln):
        tok = ln.next()
        if tok == "none":
            return None
        if not tok.startswith("$"):
            raise ln.error(f"expected a $name, found {tok!r}")
        return _Ref(tok, ln.lineno)

    def _operands(self, ln):
        ln.next("punct", "[")
        out = []
        while not ln.accept("punct", "]"):
            if out:
                ln.next("punct", ",")
            out.append(self._operand(ln))
        return out

    def _number(self, ln):
        """An int or a float, as Python wrote it (`3`, `3.0`, `1e-05`, `inf`, `nan`), or a
        bool (`True`)."""
        kind, tok = ln.peek()
        if kind == "name" and tok in ("True", "False"):
            ln.next()
            return tok == "True"
        tok = ln.next("num")
        try:
            return int(tok)
        except ValueError:
            return float(tok)

    def _op(self, ln, name):
        try:
            return ops.Op(name)
        except ValueError:
            raise ln.error(f"unknown operation {name!r}") from None

    def _int(self, ln):
        return int(ln.next("num"))

    def _global(self, ln, want):
        tok = ln.next("glob")
        m = re.fullmatch(r'@("(?:[^"\\]|\\.)*"|[^\[]+)(?:\[(\d+)\])?', tok)
        name = json.loads(m.group(1)) if m.group(1).startswith('"') else m.group(1)
        comp = None if m.group(2) is None else int(m.group(2))
        obj = self.env.get(name)
        if obj is None:
            raise ln.error(f"@{name} is not in the environment (known: "
                           f"{', '.join(sorted(self.env)) or 'nothing'})")
        if want == "field":
            if comp is not None:
                raise ln.error(f"@{name}[{comp}]: a component where a whole field is meant")
            return obj.field if hasattr(obj, "component") and hasattr(obj, "field") else obj
        # want a place: a field's component (a field given in the env: its places), or a
        # scratch buffer, which is addressed whole
        if isinstance(obj, ScratchBuffer) and comp is None:
            return obj
        places = getattr(obj, "places", None)
        if places is None:
            places = getattr(getattr(obj, "field", None), "places", None)
        if places is None:
            raise ln.error(f"@{name} is not a field")
        for p in places:
            if p.component == comp:
                return p
        raise ln.error(f"@{name} has no component {comp}")

    def _stmt(self, ln):
        name = None
        if ln.peek()[0] == "val" and ln.peek(1)[1] in ("=", ":"):
            name = ln.next()
            ln.next()
        op = ln.next("name")
        s = self._build(op, ln)
        ln.end()
        if ln.comment:
            s.loc = TextLoc(ln.comment)
        if name is not None:
            if name in self.names:
                raise ln.error(f"{name} is defined twice")
            self.names[name] = s
        return s

    def _typed(self, ln):
        """`:type` after an operation name whose syntax has no type."""
        return self._type(ln) if ln.accept("punct", ":") else None

    def _build(self, op, ln):
        o, ty = self._operand, self._type
        if op == "const":
            t = ty(ln)
            return S.ConstStmt(self._number(ln), ret_type=t)
        if op == "arg":
            t = ty(ln)
            return S.ArgLoadStmt(self._int(ln), ret_type=t)
        if op in _UNARY:
            t = ty(ln)
            return S.UnaryOpStmt(o(ln), op, ret_type=t)
        if op in _BINARY:
            t = ty(ln)
            return S.BinaryOpStmt(o(ln), o(ln), op, ret_type=t)
        if op == "select":
            t = ty(ln)
            return S.TernaryOpStmt(o(ln), o(ln), o(ln), ret_type=t)
        if op == "random":
            return S.RandStmt(ret_type=ty(ln))
        if op == "ref_arg":
            t = ty(ln)
            index = self._int(ln)
            return S.FuncRefArgStmt(index, bool(ln.accept("name", "shared")), ret_type=t)
        if op == "alloca":
            return S.AllocaStmt(ret_type=ty(ln))
        if op == "func_arg":
            t = ty(ln)
            return S.FuncArgStmt(self._int(ln), ret_type=t)
        if op == "call":
            t = self._typed(ln)
            label = ln.next("func")
            f = self.functions.get(label)
            if f is None:
                raise ln.error(f"no function {label} in the text")
            args = []
            ln.next("punct", "(")
            while not ln.accept("punct", ")"):
                if args:
                    ln.next("punct", ",")
                args.append(o(ln))
            return S.FuncCallStmt(args, f, ret_type=t)
        if op == "result":
            t = ty(ln)
            call = o(ln)
            ln.next("punct", "[")
            index = self._int(ln)
            ln.next("punct", "]")
            return S.CallResultStmt(call, index, ret_type=t)
        if op == "return_from_function":
            values = []
            while not ln.done():
                values.append(o(ln))
            return S.FuncReturnStmt(values)
        if op == "load":
            t = ty(ln)
            return S.LocalLoadStmt(o(ln), ret_type=t)
        if op == "store":
            return S.LocalStoreStmt(o(ln), o(ln))
        if op == "global_ptr":
            t = ty(ln)
            place = self._global(ln, want="place")
            return S.GlobalPtrStmt(self._operands(ln), place, ret_type=t)
        if op == "quant_ptr":
            t = ty(ln)
            place = self._global(ln, want="place")
            qtype = json.loads(ln.next("str"))
            if getattr(place, "quant", None) is None or repr(place.quant.qtype) != qtype:
                raise ln.error(f"{place!r} is not a field of {qtype}")
            return S.QuantPtrStmt(self._operands(ln), place, ret_type=t)
        if op == "external_ptr":
            t = ty(ln)
            grad = bool(ln.accept("name", "grad"))
            arg = self._global(ln, want="field")
            indices = self._operands(ln)
            component = self._kw_int(ln, "component") if not ln.done() else 0
            return S.ExternalPtrStmt(indices, arg, component, grad, ret_type=t)
        if op == "global_load":
            t = ty(ln)
            return S.GlobalLoadStmt(o(ln), ret_type=t)
        if op == "global_store":
            return S.GlobalStoreStmt(o(ln), o(ln))
        if op.startswith("atomic_"):
            t = ty(ln)
            return S.AtomicOpStmt(o(ln), o(ln), self._op(ln, op[len("atomic_"):]), ret_type=t)
        if op == "if":
            return S.IfStmt(o(ln))
        if op in ("for", "parallel_for"):
            begin = o(ln)
            ln.next("punct", "..")
            end = o(ln)
            parallel, block_dim, reductions = op == "parallel_for", None, None
            rows, jam, independent = None, None, None
            while not ln.done():
                key = ln.next("name")
                if key == "independent" and not ln.accept("punct", "="):
                    independent = True
                    continue
                if key != "independent":
                    ln.next("punct", "=")
                if key == "independent":
                    independent = self._literal(ln)
                elif key == "rows":
                    rows = o(ln)
                elif key == "jam":
                    jam = self._int(ln)
                elif key == "block_dim":
                    block_dim = self._int(ln)
                elif key == "parallel":
                    parallel = self._literal(ln)
                elif key == "reduce":
                    reductions = []
                    ln.next("punct", "[")
                    while not ln.accept("punct", "]"):
                        if reductions:
                            ln.next("punct", ",")
                        rop = self._op(ln, ln.next("name"))
                        reductions.append((o(ln), rop))
                else:
                    raise ln.error(f"a loop has no attribute {key!r}")
            return S.RangeForStmt(begin, end, parallel, block_dim, reductions, rows, jam,
                                  independent)
        if op == "loop_index":
            t = ty(ln)
            return S.LoopIndexStmt(o(ln), ret_type=t)
        if op in ("struct_for", "parallel_struct_for"):
            t = ty(ln)
            over = self._global(ln, want="field")
            bounds = self._literal(ln)
            if not isinstance(bounds, list) or not all(
                    isinstance(b, tuple) and len(b) == 2 and all(type(v) is int for v in b)
                    for b in bounds):
                raise ln.error(f"a struct-for's bounds are [(begin, end), ...], not {bounds!r}")
            grouped = bool(ln.accept("name", "grouped"))
            block_dim = self._kw_int(ln, "block_dim") if not ln.done() else None
            return S.StructForStmt(over, bounds, grouped, op == "parallel_struct_for",
                                   block_dim, ret_type=t)
        if op in ("ndrange_for", "parallel_ndrange_for"):
            t = ty(ln)
            bounds = self._literal(ln)
            if not isinstance(bounds, list) or not all(
                    isinstance(b, tuple) and len(b) == 2 and
                    all(type(v) is int or isinstance(v, _Ref) for v in b) for b in bounds):
                raise ln.error(f"an ndrange-for's bounds are [(begin, end), ...] of ints and "
                               f"$names, not {bounds!r}")
            grouped = bool(ln.accept("name", "grouped"))
            block_dim = self._kw_int(ln, "block_dim") if not ln.done() else None
            return S.NdRangeForStmt([b for b, _ in bounds], [e for _, e in bounds], grouped,
                                    op == "parallel_ndrange_for", block_dim, ret_type=t)
        if op == "struct_index":
            t = ty(ln)
            loop = o(ln)
            ln.next("punct", "[")
            axis = self._int(ln)
            ln.next("punct", "]")
            return S.StructIndexStmt(loop, axis, ret_type=t)
        if op in ("row_index", "col_index"):
            t = ty(ln)
            loop = o(ln)
            ln.next("name", "width")
            ln.next("punct", "=")
            return S.RowIndexStmt(o(ln), loop, op[:-len("_index")], ret_type=t)
        if op == "while":
            return S.WhileStmt()
        if op == "break":
            return S.BreakStmt()
        if op == "continue":
            return S.ContinueStmt()
        if op == "return":
            ln.next("punct", "[")
            index = self._int(ln)
            ln.next("punct", "]")
            return S.ReturnStmt(o(ln), index)
        if op == "print":
            values, fmt = [], []
            while not ln.done():
                kind, tok = ln.peek()
                if kind == "str":
                    ln.next()
                    fmt.append(ast.literal_eval(tok))
                    continue
                v = o(ln)
                spec = ast.literal_eval(ln.next("str")) if ln.accept("punct", ":") else None
                fmt.append((len(values), spec))
                values.append(v)
            return S.PrintStmt(values, tuple(fmt))
        if op == "assert":
            cond = o(ln)
            code = self._kw_int(ln, "error")
            args = []
            if not ln.done():
                ln.next("name", "args")
                ln.next("punct", "=")
                args = self._operands(ln)
            return S.AssertStmt(cond, args, code)
        if op == "tape_log":
            kind = ln.next("name")
            ptr = o(ln)
            vals = {}
            for key in ("read", "written", "grad"):
                ln.next("name", key)
                ln.next("punct", "=")
                vals[key] = o(ln)
            return S.TapeLogStmt(ptr, vals["read"], vals["written"], vals["grad"], kind)
        if op == "private_add":
            ln.next("punct", "[")
            ln.next("name", "copy")
            copy = self._int(ln)
            ln.next("punct", "]")
            return S.PrivateAddStmt(o(ln), o(ln), copy)
        if op == "merge_copies":
            return S.MergeCopiesStmt(self._int(ln))
        if op == "slot_acquire":
            return S.SlotAcquireStmt(o(ln))
        if op == "worker_index":
            return S.WorkerIndexStmt(ret_type=ty(ln))
        if op == "shared_array":
            t = self._typed(ln)
            dtype = ty(ln)
            return S.SharedArrayStmt(self._literal(ln), dtype, ret_type=t)
        if op == "shared_ptr":
            t = ty(ln)
            array = o(ln)
            return S.SharedPtrStmt(array, self._operands(ln), ret_type=t)
        if op == "block_sync":
            return S.BlockSyncStmt()
        if op == "thread_index":
            t = ty(ln)
            return S.ThreadIndexStmt(ln.next("name"), ret_type=t)
        if op == "ad_stack_alloca":
            t = self._typed(ln)
            dtypes = tuple(self._types(ln))
            ln.next("name", "capacity")
            ln.next("punct", "=")
            return S.AdStackAllocaStmt(dtypes, self._literal(ln), ret_type=t)
        if op == "ad_stack_push":
            stack = o(ln)
            values = []
            while not ln.done():
                values.append(o(ln))
            return S.AdStackPushStmt(stack, values)
        if op == "ad_stack_top":
            t = ty(ln)
            stack = o(ln)
            ln.next("punct", "[")
            slot = self._int(ln)
            ln.next("punct", "]")
            return S.AdStackTopStmt(stack, slot, ret_type=t)
        if op == "ad_stack_pop":
            return S.AdStackPopStmt(o(ln))
        if op == "ad_stack_size":
            t = ty(ln)
            return S.AdStackSizeStmt(o(ln), ret_type=t)
        if op.startswith("!"):
            return self._generic(op[1:], ln)
        raise ln.error(f"unknown operation {op!r}")

    def _generic(self, cls_name, ln):
        cls = getattr(S, cls_name, None)
        if not (isinstance(cls, type) and issubclass(cls, S.Stmt)):
            raise ln.error(f"no statement class {cls_name!r}")
        t = self._type(ln)
        kw = {}
        while not ln.done():
            key = ln.next("name")
            ln.next("punct", "=")
            kw[key] = self._value(ln)
        unknown = set(kw) - set(cls.OPERANDS) - set(cls.ATTRS)
        if unknown:
            raise ln.error(f"{cls_name} has no field {', '.join(sorted(unknown))}")
        return cls(ret_type=t, **kw)

    def _value(self, ln):
        kind, tok = ln.peek()
        if kind == "val":
            return self._operand(ln)
        if kind == "glob":
            return self._global(ln, want="place")
        return self._literal(ln)

    def _literal(self, ln):
        kind, tok = ln.peek()
        if kind in ("num", "str"):
            ln.next()
            if tok in ("inf", "-inf", "nan", "-nan"):
                return float(tok)
            return ast.literal_eval(tok)
        if kind == "val":
            return self._operand(ln)
        if tok in ("[", "("):
            ln.next()
            close = "]" if tok == "[" else ")"
            items, trailing = [], False
            while not ln.accept("punct", close):
                if items and not trailing:
                    ln.next("punct", ",")
                    if ln.accept("punct", close):
                        trailing = True
                        break
                items.append(self._value(ln))
            return items if tok == "[" else tuple(items)
        if kind == "name":
            ln.next()
            if tok in ("None", "True", "False"):
                return {"None": None, "True": True, "False": False}[tok]
            try:
                return T.by_name(tok)
            except KeyError:
                return tok
        raise ln.error(f"expected a value, found {tok!r}")
