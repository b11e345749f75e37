"""Several record types in one column: a writer record read with a reader union of records.

Confluent's "several event types in one topic" reads as spark-avro's
``struct<member0, member1, ...>``, one field per type of the reader union, the taken one
set. Each writer schema is one of those types (a record written alone with
RecordNameStrategy, or a union of references whose every record is one type): the writer
record names its member, so a batch of one writer schema fills one member, decoded
column-wise by that member's flat plan when it has one. A writer record of a type the
union lacks is a bad record naming the types read, never dropped.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .columns import ResolutionError, build_plan
from .types import NAMED, avro_to_spark, simple_string, union_parts


def member_of(writer: dict, reader: dict) -> int | None:
    """The member (index among the reader union's non-null branches) a named writer type
    is read into; None when the pair is not a named writer type read with a union of
    several named types. ResolutionError when the union has no branch of its name."""
    if reader["type"] != "union" or writer["type"] not in NAMED:
        return None
    branches, _has_null = union_parts(reader)
    if len(branches) < 2 or any(b["type"] not in NAMED for b in branches):
        return None
    same_kind = [(i, b) for i, b in enumerate(branches) if b["type"] == writer["type"]]
    for index, branch in same_kind:
        if branch["name"] == writer["name"]:
            return index
    # Avro's resolution matches named types by unqualified name (or alias) too
    short = writer["name"].rpartition(".")[2]
    for index, branch in same_kind:
        if short in [n.rpartition(".")[2] for n in [branch["name"], *branch.get("aliases", ())]]:
            return index
    names = ", ".join(b["name"] for b in branches)
    raise ResolutionError(
        f"the writer schema's type {writer['name']} is none of the types read ({names})"
    )


class MemberPlan:
    """Decodes records of one writer record into one member of the reader's union struct,
    column-wise (a FlatPlan of writer and member), the other members null."""

    def __init__(self, plan, member: int, arrow_type: pa.StructType):
        self.plan = plan
        self.member = member
        self.arrow_type = arrow_type

    def decode(self, data, starts, ends):
        array, bad, reasons = self.plan.decode(data, starts, ends)
        n = len(starts)
        children = [
            array if i == self.member else pa.nulls(n, field.type)
            for i, field in enumerate(self.arrow_type)
        ]
        struct = pa.StructArray.from_arrays(
            children, fields=list(self.arrow_type), mask=pa.array(np.asarray(bad, bool))
        )
        return struct, bad, reasons


def member_plan(writer: dict, reader: dict, arrow_type) -> MemberPlan | None:
    """The column-wise plan of a writer record read into its member of a reader union, or
    None (not such a pair, or the member is not flat: the general path decodes it)."""
    member = member_of(writer, reader)
    if member is None:
        return None
    branch = union_parts(reader)[0][member]
    plan = build_plan(writer, branch)
    return None if plan is None else MemberPlan(plan, member, arrow_type)


def tag_member(decoder, writer: dict, reader: dict):
    """``decoder`` (the general path's) for a writer record read into its member of a
    reader union: fastavro returns such a record bare, and the union's converter tells
    branches apart by ``(branch name, value)``, so the record is tagged with its member."""
    member = member_of(writer, reader)
    if member is None:
        return decoder
    name = union_parts(reader)[0][member]["name"]
    convert = decoder.convert
    decoder.convert = lambda value: convert((name, value))
    return decoder


def type_member_names(node: dict) -> tuple[str, ...] | None:
    """The fields of a union of several named types named by type (``Order``; the full name
    with ``_`` for dots where two types share a name), or None: not such a union."""
    if node["type"] != "union":
        return None
    branches, _has_null = union_parts(node)
    if len(branches) < 2 or any(b["type"] not in NAMED for b in branches):
        return None
    short = [b["name"].rpartition(".")[2] for b in branches]
    return tuple(
        name if short.count(name) == 1 else b["name"].replace(".", "_")
        for name, b in zip(short, branches, strict=True)
    )


def renamed_spark_type(node: dict, names) -> str:
    """The Spark type (simpleString) of the union ``node`` with its fields named ``names``."""
    (_kind, fields), _nullable = avro_to_spark(node)
    return simple_string(
        (
            "struct",
            tuple(
                (name, kind, nullable)
                for name, (_, kind, nullable) in zip(names, fields, strict=True)
            ),
        )
    )


def renamed(array, names):
    """``array`` (a struct array) with its fields named ``names``, sharing its buffers."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    return pa.StructArray.from_arrays(
        [array.field(i) for i in range(array.type.num_fields)],
        names=list(names),
        mask=array.is_null(),
    )


class UnionPlan:
    """Column-wise decode of a writer union of named types (Confluent's union of references)
    into the reader's union struct: each record's branch index is read for all rows at once,
    then each branch's rows are decoded by that branch's flat plan into its member."""

    def __init__(
        self, branch_plans: dict, null_branches: frozenset, arrow_type, failed_branches: dict
    ):
        self.branch_plans = branch_plans  # writer branch index -> (member, FlatPlan)
        self.null_branches = null_branches  # writer branch indexes of "null"
        self.arrow_type = arrow_type
        self.failed_branches = failed_branches  # writer branch index -> reason

    def decode(self, data, starts, ends):
        n = len(starts)
        bad = np.zeros(n, bool)
        reasons = np.empty(n, dtype=object)
        # one byte holds the zigzag varint of indexes 0..63; anything else is no branch here
        first = data.take(starts, mode="clip") if data.size else np.zeros(n, np.uint8)
        empty = starts >= ends
        branch = np.where((first & 0x81) == 0, first >> 1, -1).astype(np.int64)
        branch[empty] = -1
        for index, reason in self.failed_branches.items():
            rows = np.flatnonzero(branch == index)
            bad[rows] = True
            reasons[rows] = reason
        known = np.isin(
            branch, list(self.branch_plans) + list(self.null_branches) + list(self.failed_branches)
        )
        unknown = np.flatnonzero(~known)
        bad[unknown] = True
        reasons[unknown] = [
            "truncated: no union branch"
            if empty[r]
            else f"not valid Avro: union branch byte {int(first[r])} names no "
            "branch of the writer schema"
            for r in unknown.tolist()
        ]
        members: list[list] = [[] for _ in self.arrow_type]  # per member: (rows, decoded struct)
        for index, (member, plan) in self.branch_plans.items():
            rows = np.flatnonzero(branch == index)
            if not rows.size:
                continue
            array, group_bad, group_reasons = plan.decode(data, starts[rows] + 1, ends[rows])
            if group_bad.any():
                local = np.flatnonzero(group_bad)
                bad[rows[local]] = True
                reasons[rows[local]] = group_reasons[local]
            members[member].append((rows, array))
        children = [
            self._member_column(n, parts, field.type)
            for parts, field in zip(members, self.arrow_type, strict=True)
        ]
        is_null = bad | ~known | np.isin(branch, list(self.null_branches))
        struct = pa.StructArray.from_arrays(
            children, fields=list(self.arrow_type), mask=pa.array(is_null)
        )
        return struct, bad, reasons

    @staticmethod
    def _member_column(n, parts, arrow_type):
        """One member's column in row order: its rows' values, null elsewhere."""
        if not parts:
            return pa.nulls(n, arrow_type)
        covered = np.concatenate([rows for rows, _ in parts])
        missing = np.ones(n, bool)
        missing[covered] = False
        rest = np.flatnonzero(missing)
        arrays = [array for _, array in parts] + [pa.nulls(len(rest), arrow_type)]
        position = np.empty(n, np.int64)
        position[np.concatenate([covered, rest])] = np.arange(n)
        return pa.concat_arrays(arrays).take(pa.array(position))


def union_plan(writer: dict, reader: dict, arrow_type) -> UnionPlan | None:
    """The column-wise plan of a writer union of named types read with a reader union, or
    None (another pair, more than 64 branches, or a branch that is not flat)."""
    if (
        writer["type"] != "union"
        or reader["type"] != "union"
        or len(writer["branches"]) > 64
        or type_member_names(reader) is None
    ):
        return None
    branch_plans, null_branches, failed = {}, set(), {}
    for index, branch in enumerate(writer["branches"]):
        if branch["type"] == "null":
            null_branches.add(index)
            continue
        try:
            member = member_of(branch, reader)
        except ResolutionError as exc:  # a type the reader lacks: its records only
            failed[index] = f"cannot be resolved to the reader schema: {exc}"
            continue
        if member is None:
            return None
        plan = build_plan(branch, union_parts(reader)[0][member])
        if plan is None:
            return None
        branch_plans[index] = (member, plan)
    if null_branches and not union_parts(reader)[1]:
        return None  # (fastavro reports that mismatch)
    return UnionPlan(branch_plans, frozenset(null_branches), arrow_type, failed)
