#!/usr/bin/env python3
"""Writes src/arbiterhq/_models.py from the API's OpenAPI document.

The SDK never defines the wire by hand: every object the API answers that
the SDK reads is a frozen dataclass made here from its schema, with one
field per property (a later server's unknown properties land in
``extra``), and every request body the SDK sends is a TypedDict made from
its schema. ``make sdk-wire`` runs this; ``make test-python`` fails when
the committed file differs from what it writes.

Usage: generate_models.py OPENAPI_JSON OUTPUT_PY
"""

from __future__ import annotations

import json
import keyword
import re
import sys
from typing import Any, Dict, List, Optional, Tuple

# The schemas read into dataclasses, in the order they are written; the
# schemas they reference (and the objects nested in them) must be here
# too. A mixin (from _base) adds behaviour to a class without fields.
MODELS: List[str] = [
    "Attempt",
    "DisplayField",
    "Display",
    "ReviewRequirement",
    "TaskEscalation",
    "Action",
    "ApprovedAction",
    "Task",
    "EscalationRung",
    "Policy",
    "ReliabilityBin",
    "RiskCoveragePoint",
    "CalibrationRecommendation",
    "CalibrationCertification",
    "CalibrationFeasibility",
    "AgreementStats",
    "CalibrationStratum",
    "CalibrationDrift",
    "CalibrationReport",
    "ReviewerAgreement",
    "AgreementReport",
    "WebhookTaskEvent",
    "JWK",
    "JWKS",
]
MIXINS: Dict[str, str] = {"Task": "TaskMixin"}

# The webhook events whose bodies are not WebhookTaskEvent, as classes
# named here.
WEBHOOK_EVENTS: Dict[str, str] = {
    "ping": "PingEvent",
    "calibration.drifted": "CalibrationDriftedEvent",
    "task.vote_recorded": "VoteRecordedEvent",
}

# The request bodies whose optional fields but these have a TypedDict of
# their own, by its name.
OPTIONS: Dict[str, Tuple[str, List[str]]] = {"TaskCreate": ("TaskCreateOptions", ["context"])}

# The request bodies, as TypedDicts of the keyword arguments that send them.
PARAMS: Dict[str, str] = {
    "TaskCreate": "TaskCreateParams",
    "TaskBatchItem": "TaskBatchItemParams",
    "PolicyPut": "PolicyUpdateParams",
}


def camel(name: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in name.replace(".", "_").replace("-", "_").split("_"))


def ident(name: str) -> str:
    return name + "_" if keyword.iskeyword(name) else name


def docline(text: str, indent: str) -> str:
    """A docstring of text, wrapped at 76 columns."""
    text = " ".join(text.replace("\\", "\\\\").replace('"""', "'''").split())
    words, lines, line = text.split(" "), [], ""
    for w in words:
        if line and len(indent) + len(line) + 1 + len(w) > 76:
            lines.append(line)
            line = w
        else:
            line = (line + " " + w) if line else w
    lines.append(line)
    if len(lines) == 1:
        return f'{indent}"""{lines[0]}"""\n'
    body = "\n".join(indent + ln for ln in lines)
    return f'{indent}"""{body.lstrip()}\n{indent}"""\n'


class Generator:
    def __init__(self, doc: Dict[str, Any]) -> None:
        self.doc = doc
        self.schemas: Dict[str, Any] = doc["components"]["schemas"]
        self.out: List[str] = []
        # Classes written, in order: name -> (schema, mixin).
        self.classes: List[Tuple[str, Dict[str, Any], Optional[str]]] = []
        self.known: Dict[str, str] = {}

    # Types -----------------------------------------------------------------

    def resolve(self, s: Dict[str, Any]) -> Tuple[Dict[str, Any], Optional[str]]:
        """The schema behind a $ref and, for a component, its name."""
        ref = s.get("$ref")
        if ref is None:
            return s, None
        name = ref.rsplit("/", 1)[-1]
        return self.schemas[name], name

    def nullable(self, s: Dict[str, Any]) -> Tuple[Dict[str, Any], bool]:
        """The schema without its null branch, and whether it had one."""
        t = s.get("type")
        if isinstance(t, list) and "null" in t:
            rest = [x for x in t if x != "null"]
            return {**s, "type": rest[0] if len(rest) == 1 else rest}, True
        for key in ("oneOf", "anyOf"):
            if key in s:
                branches = [b for b in s[key] if b.get("type") != "null"]
                if len(branches) < len(s[key]) and len(branches) == 1:
                    return {**{k: v for k, v in s.items() if k != key}, **branches[0]}, True
        return s, False

    def kind(self, s: Dict[str, Any], owner: str, prop: str) -> Tuple[str, str, Optional[Dict[str, Any]]]:
        """(python type, kind, element) of a schema without null: kind is
        one of str int float bool any dict list model."""
        s, name = self.resolve(s)
        if name is not None and name in self.known:
            return self.known[name], "model", None
        t = s.get("type")
        if t == "object" or (t is None and "properties" in s):
            if "properties" in s:
                cls = self.inline_class(s, owner + camel(prop))
                return cls, "model", None
            return "Dict[str, Any]", "dict", None
        if t == "array":
            return "List", "list", s.get("items", {})
        if t == "string" or "const" in s:
            return "str", "str", None
        if t == "integer":
            return "int", "int", None
        if t == "number":
            return "float", "float", None
        if t == "boolean":
            return "bool", "bool", None
        return "Any", "any", None

    def inline_class(self, s: Dict[str, Any], name: str) -> str:
        if name not in self.known:
            self.known[name] = name
            self.classes.append((name, s, None))
        return name

    def field_type(self, s: Dict[str, Any], owner: str, prop: str) -> Tuple[str, str, bool]:
        """The annotation of a field, the expression reading it from v (not
        None), and whether it may be null."""
        inner, null = self.nullable(s)
        ann, read = self.read(inner, owner, prop, "v")
        return (f"Optional[{ann}]" if null and ann != "Any" else ann), read, null

    def read(self, s: Dict[str, Any], owner: str, prop: str, v: str) -> Tuple[str, str]:
        py, kind, items = self.kind(s, owner, prop)
        if kind == "model":
            return py, f"{py}.from_dict({v})"
        if kind == "list":
            assert items is not None
            inner, null = self.nullable(items)
            ann, read = self.read(inner, owner, prop + "_item", "x")
            if null:
                ann, read = f"Optional[{ann}]", f"None if x is None else {read}"
            return f"List[{ann}]", f"[{read} for x in {v}]"
        if kind == "dict":
            return py, f"dict({v})"
        if kind == "any":
            return py, v
        return py, f"{py}({v})"

    def write(self, s: Dict[str, Any], owner: str, prop: str, v: str) -> str:
        """The expression writing field value v as JSON."""
        inner, null = self.nullable(s)
        py, kind, items = self.kind(inner, owner, prop)
        if kind == "model":
            expr = f"{v}.to_dict()"
        elif kind == "list":
            assert items is not None
            item_inner, item_null = self.nullable(items)
            item = self.write(item_inner, owner, prop + "_item", "x")
            if item_null and item != "x":
                item = f"None if x is None else {item}"
            expr = f"[{item} for x in {v}]" if item != "x" else f"list({v})"
        elif kind == "dict":
            expr = f"dict({v})"
        else:
            expr = v
        if null and expr != v:
            return f"None if {v} is None else {expr}"
        return expr

    def param_type(self, s: Dict[str, Any]) -> str:
        inner, null = self.nullable(s)
        inner, _ = self.resolve(inner)
        inner, null2 = self.nullable(inner)
        t = inner.get("type")
        if t == "array":
            ann = f"Sequence[{self.param_type(inner.get('items', {}))}]"
        elif t == "object" or "properties" in inner:
            ann = "Mapping[str, Any]"
        elif t == "string" or "const" in inner:
            ann = "str"
        elif t == "integer":
            ann = "int"
        elif t == "number":
            ann = "float"
        elif t == "boolean":
            ann = "bool"
        else:
            ann = "Any"
        return f"Optional[{ann}]" if (null or null2) and ann != "Any" else ann

    # Output ----------------------------------------------------------------

    def model(self, name: str, s: Dict[str, Any], mixin: Optional[str]) -> str:
        props: Dict[str, Any] = s.get("properties", {})
        required = set(s.get("required", []))
        fields: List[Tuple[str, str, str, str, bool, bool]] = []
        for prop, ps in props.items():
            ann, read, null = self.field_type(ps, name, prop)
            write = self.write(ps, name, prop, "self." + ident(prop))
            fields.append((prop, ann, read, write, prop in required, null))
        ordered = [f for f in fields if f[4]] + [f for f in fields if not f[4]]
        base = f"{mixin}, APIObject" if mixin else "APIObject"
        out = ["\n\n@dataclass(frozen=True)\n", f"class {name}({base}):\n"]
        out.append(docline(s.get("description") or f"The API's {name}.", "    "))
        out.append("\n")
        for prop, ann, _, _, req, _ in ordered:
            desc = props[prop].get("description")
            if desc:
                for ln in _comment(desc):
                    out.append(f"    #: {ln}\n")
            if req:
                out.append(f"    {ident(prop)}: {ann}\n")
            else:
                opt = ann if ann.startswith("Optional[") or ann == "Any" else f"Optional[{ann}]"
                out.append(f"    {ident(prop)}: {opt} = None\n")
        out.append("    #: Properties a later server added, kept as sent.\n")
        out.append("    extra: Dict[str, Any] = dataclasses.field(default_factory=dict, repr=False, compare=False)\n")
        keys = ", ".join(repr(p) for p in props)
        out.append(f"\n    _FIELDS: ClassVar[FrozenSet[str]] = frozenset({{{keys}}})\n")
        out.append("\n    @classmethod\n")
        out.append(f'    def from_dict(cls, d: Mapping[str, Any]) -> "{name}":\n')
        out.append(f'        """Reads the {name} as the API sends it."""\n')
        out.append("        return cls(\n")
        for prop, _, read, _, req, null in ordered:
            if req and not null:
                expr = _subst(read, f"d[{prop!r}]")
            elif read == "v":
                expr = f"d.get({prop!r})"
            elif re.fullmatch(r"[\w.]+\(v\)", read):
                expr = f"_opt(d.get({prop!r}), {read[:-3]})"
            else:
                expr = f"_opt(d.get({prop!r}), lambda v: {read})"
            out.append(f"            {ident(prop)}={expr},\n")
        out.append("            extra=_extra(d, cls._FIELDS),\n")
        out.append("        )\n")
        out.append("\n    def to_dict(self) -> Dict[str, Any]:\n")
        out.append(f'        """The {name} as JSON: what from_dict read, properties left out\n')
        out.append('        when they were absent (None) and not required."""\n')
        out.append("        d: Dict[str, Any] = dict(self.extra)\n")
        for prop, _, _, write, req, _ in ordered:
            attr = "self." + ident(prop)
            if req:
                out.append(f"        d[{prop!r}] = {write}\n")
            else:
                w = write.removeprefix(f"None if {attr} is None else ")
                out.append(f"        if {attr} is not None:\n")
                out.append(f"            d[{prop!r}] = {w}\n")
        out.append("        return d\n")
        return "".join(out)

    def typed_dict(self, schema_name: str, name: str) -> str:
        """The TypedDict of a request body: its required fields in a base
        class, and, for a body named in OPTIONS, its other fields but the
        ones listed there in a TypedDict of their own (what a call that
        takes the rest as arguments accepts as keywords)."""
        s = self.schemas[schema_name]
        props: Dict[str, Any] = s.get("properties", {})
        required = [p for p in props if p in set(s.get("required", []))]
        optional = [p for p in props if p not in required]
        options_name, kept = OPTIONS.get(schema_name, ("", []))
        out = []
        if required:
            out.append(f"\n\nclass _{name}Required(TypedDict):\n")
            for p in required:
                out.append(f"    {p}: {self.param_type(props[p])}\n")
        bases = [f"_{name}Required"] if required else []
        own = optional
        if options_name:
            out.append(f"\n\nclass {options_name}(TypedDict, total=False):\n")
            out.append(docline(f"The optional fields of a {schema_name} body but "
                               + ", ".join(kept) + ".", "    "))
            out.append("\n")
            for p in optional:
                if p not in kept:
                    out.extend(self.param_field(p, props[p]))
            bases.append(options_name)
            own = kept
        if not bases:
            bases = ["TypedDict"]
        out.append(f"\n\nclass {name}({', '.join(bases)}, total=False):\n")
        out.append(docline(f"The keyword arguments of a {schema_name} body. "
                           + (s.get("description") or ""), "    "))
        if own:
            out.append("\n")
        for p in own:
            out.extend(self.param_field(p, props[p]))
        return "".join(out)

    def param_field(self, prop: str, s: Dict[str, Any]) -> List[str]:
        out = [f"    #: {ln}\n" for ln in _comment(s["description"])] if s.get("description") else []
        out.append(f"    {prop}: {self.param_type(s)}\n")
        return out

    def run(self) -> str:
        for name in MODELS:
            self.known[name] = name
        for name in MODELS:
            self.classes.append((name, self.schemas[name], MIXINS.get(name)))
        for event, cls in WEBHOOK_EVENTS.items():
            body = self.doc["webhooks"][event]["post"]["requestBody"]["content"]["application/json"]["schema"]
            body, _ = self.resolve(body)
            self.known[cls] = cls
            self.classes.append((cls, body, None))
        # Writing a class may add the inline classes it holds; write until done.
        written: List[str] = []
        parts: Dict[str, str] = {}
        i = 0
        while i < len(self.classes):
            name, s, mixin = self.classes[i]
            parts[name] = self.model(name, s, mixin)
            written.append(name)
            i += 1
        head = [
            '"""The API\'s objects, generated by scripts/generate_models.py from\n',
            "openapi/openapi.json: do not edit (``make sdk-wire`` rewrites it).\n\n",
            "Objects the API answers are frozen dataclasses with one field per\n",
            "property; properties a later server adds are kept in ``extra``. Request\n",
            'bodies are TypedDicts of the keyword arguments that send them."""\n\n',
            "from __future__ import annotations\n\n",
            "import dataclasses\n",
            "from dataclasses import dataclass\n",
            "from typing import Any, Callable, ClassVar, Dict, FrozenSet, List, Mapping, Optional, Sequence, TypedDict, TypeVar\n\n",
            "from ._base import APIObject, TaskMixin\n\n",
            "_T = TypeVar(\"_T\")\n\n\n",
            "def _opt(v: Any, read: Callable[[Any], _T]) -> Optional[_T]:\n",
            "    return None if v is None else read(v)\n\n\n",
            "def _extra(d: Mapping[str, Any], known: FrozenSet[str]) -> Dict[str, Any]:\n",
            "    return {k: v for k, v in d.items() if k not in known}\n",
        ]
        # Inline classes first where they are used before definition: the
        # annotations are strings, and from_dict runs after the module is
        # loaded, so order does not matter to Python; keep generation order.
        body = [parts[n] for n in written]
        params = [self.typed_dict(s, n) for s, n in PARAMS.items()]
        names = sorted(set(written) | set(PARAMS.values()) | {o for o, _ in OPTIONS.values()})
        tail = ["\n\n__all__ = [\n"] + [f"    {n!r},\n" for n in names] + ["]\n"]
        return "".join(head) + "".join(body) + "".join(params) + "".join(tail)


def _subst(read: str, get: str) -> str:
    """read with its value v replaced by get (v stands alone as a name)."""
    return re.sub(r"\bv\b", get, read)


def _comment(text: str) -> List[str]:
    words = " ".join(text.split()).split(" ")
    lines, line = [], ""
    for w in words:
        if line and len(line) + 1 + len(w) > 70:
            lines.append(line)
            line = w
        else:
            line = (line + " " + w) if line else w
    lines.append(line)
    return lines


def main(argv: List[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        doc = json.load(f)
    text = Generator(doc).run()
    with open(argv[2], "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
