"""Compare a candidate's captured launches with the reference's, launch by launch and buffer by buffer.

The reference ran several times (calibration runs). Each float element the kernel writes is judged
against the mean of the reference runs there, within::

    atol + rtol * |mean|  +  u * sqrt(N) * |mean|  +  k * s * sqrt(1 + 1/n)

* ``atol``/``rtol``: the user's tolerances (defaults 1e-6 and 1e-5).
* ``u * sqrt(N) * |mean|``: rounding. A value computed from N terms in another order differs from the
  first by about sqrt(N) unit roundoffs ``u`` of its type, relative to its terms (probabilistic rounding
  error analysis, Higham and Mary 2019, with lambda = 1); N is the number of elements in the launch's
  buffers, the most terms any output can be made of, and |mean| stands in for the terms' scale. This is
  what lets a sum that was one atomicAdd chain become a tree: such a chain carries a systematic rounding
  bias of its own, which its run-to-run noise does not show (seen on an H100: 4 to 20 standard
  deviations for 4-16M-term sums that drift one way).
* ``k * s * sqrt(1 + 1/n)``: the reference's own noise. ``s`` is the standard deviation of the n
  reference runs at that element (0 where they agree), and k the two-sided quantile of Student's t with
  n - 1 degrees of freedom at ``alpha / M``, M the elements of that output where the runs disagree
  (Bonferroni). So a candidate whose values are another draw of the reference's own distribution
  fails an output with probability at most ``alpha``: a prediction interval, with the uncertainty of
  ``s`` itself priced in by t, not a magic widening. ``accordo.validate`` takes more reference runs
  when the first ones disagree, so that ``s`` is stable.

Each output reports ``bound_use``: its worst element's error over its bound (1.0 is the edge). Integer
elements are exact where the reference runs agree and within their range elsewhere; bytes that differ
between the reference runs before a launch are not treated as inputs.

Two candidate captures are judged (``accordo.validate``):

* **each launch in isolation** (``compare_captures``): the candidate ran with the reference's inputs
  restored into its buffers before every launch (capture mode's ``restore`` setting), so each launch is
  judged on the reference's own inputs for it and drift that earlier launches were allowed never becomes
  an input of a later one. For each launch (paired in order) it checks, in this order:

  * the parameters: same kinds, same scalar values, pointers at the same offset into same-sized
    allocations (``input_mismatch`` otherwise);
  * every allocation before the kernel: byte-identical to the reference (``input_mismatch``);
  * allocations of parameters the reference's kernel never writes, at any launch: byte-identical after
    the kernel (``input_modified`` for ``const`` parameters, ``untouched_modified`` otherwise);
  * allocations of parameters it writes at some launch (outputs, whatever they held before, also at a
    launch that rewrites them with the same bits): every element within its bound (``mismatch``); when
    every out-of-bound element is one the reference leaves unchanged, the candidate wrote where the
    reference does not (``untouched_modified``).

* **the program end to end** (``compare_end_to_end``): the candidate's own run, nothing restored: the
  same launches, the first launch given the same inputs (a changed data layout is ``input_mismatch``), no
  input modified at any launch, and each output allocation's final state within its bound.

A candidate that modifies an input is reported as ``input_modified`` whatever its outputs say, at any
launch and in either capture: the tampering is the cause, a mismatch at most its symptom.

Buffers are read in chunks straight from the memory-mapped capture files, so memory stays bounded.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from intelliperf.contract.report import BufferComparison, LaunchComparison
from intelliperf.errors import ValidationError

from .capture import Buffer, Capture, Launch, Param, equal_bytes
from .float_bound import Tolerance, check_floats, noise_factor, reference_stats
from .signature import ParamType, element_type, parse_parameters

__all__ = [
    "DEFAULT_ALPHA",
    "RESTORE_FAILED",
    "Comparison",
    "combine",
    "compare_captures",
    "compare_end_to_end",
    "reference_disagrees",
    "written_params",
]

CHUNK_BYTES = 32 << 20
RESTORE_FAILED = "restoring the reference's"
"""How the capture library's error record for a launch whose inputs could not be restored begins."""
DEFAULT_ALPHA = 0.01  # per output: how often another draw of the reference's own noise may fail it
# Within a launch; across launches the first failing launch decides, except that input_modified (the
# candidate tampering with an input) is reported whatever else fails.
_FAILURE_ORDER = ("crash", "input_modified", "input_mismatch", "mismatch", "untouched_modified")
# Unit roundoff per float type (half the distance from 1.0 to the next value).
_UNIT_ROUNDOFF = {"float64": 2.0**-53, "float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}


@dataclass
class Comparison:
    passed: bool
    failure: str | None
    reason: str | None
    launches: list[LaunchComparison]
    launches_compared: int
    noise_max: float = 0.0  # the largest standard deviation of the reference runs at any element
    bound_use: float | None = None  # the worst output's bound_use (None: no element needed a bound)


@dataclass
class _Failure:
    kind: str
    message: str


@dataclass
class _ElementStats:
    checked: int = 0
    mismatches: int = 0
    outside_untouched: int = 0  # mismatches at elements the reference writes
    nan_inf: int = 0
    max_abs: float = 0.0
    max_rel: float = 0.0
    first: int | None = None
    first_values: tuple[float, float, float] | None = None  # candidate, reference, bound
    noise_max: float = 0.0
    noisy: int = 0  # elements where the reference runs disagree
    bound_use: float = 0.0  # the worst element's error over its bound


@dataclass
class _Pair:
    """One allocation of one launch: the reference runs' snapshots and the candidate's."""

    param: Param
    type_info: ParamType | None
    element: str | None  # None: bytes
    refs_before: list[Buffer]
    refs_after: list[Buffer]
    cand_before: Buffer
    cand_after: Buffer
    pointer_offset: int  # bytes from the parameter's pointer to the snapshot's first byte (<= 0)
    label: str = field(default="")


def _name(launch: Launch) -> str:
    return launch.demangled.split("(", 1)[0] if "(" in launch.demangled else launch.demangled


def _counts(launches: Sequence[Launch]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for launch in launches:
        counts[_name(launch)] = counts.get(_name(launch), 0) + 1
    return counts


def _describe_counts(counts: dict[str, int]) -> str:
    return (
        ", ".join(f"{name} {n} time{'s' if n != 1 else ''}" for name, n in sorted(counts.items()))
        or "nothing"
    )


def _check_reference(reference: Sequence[Capture]) -> None:
    if not reference:
        raise ValueError("at least one reference capture is needed")
    first = reference[0]
    for run, capture in enumerate(reference[1:], start=2):
        if len(capture.launches) != len(first.launches):
            raise ValidationError(
                "the reference is not deterministic: run 1 launched "
                f"{_describe_counts(_counts(first.launches))}, run {run} "
                f"{_describe_counts(_counts(capture.launches))}"
            )
    for run, capture in enumerate(reference, start=1):
        for launch in capture.launches:
            if launch.errors:
                raise ValidationError(
                    f"the reference's launch {launch.seq} of {_name(launch)} (run {run}) could not be "
                    f"captured: {'; '.join(launch.errors)}"
                )


# ----------------------------------------------------------------------------------------------------------
# Element views


_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_ITEMSIZE = {
    "float32": 4,
    "float64": 8,
    "float16": 2,
    "bfloat16": 2,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "int32": 4,
    "uint32": 4,
    "int64": 8,
    "uint64": 8,
}


def _itemsize(element: str | None) -> int:
    return 1 if element is None else _ITEMSIZE[element]


def _as_float(raw: np.ndarray, element: str) -> np.ndarray:
    """Unsigned raw elements (as read from a buffer) to float64 values."""
    if element == "bfloat16":
        return (raw.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if element in ("float32", "float64", "float16"):
        return raw.view(np.dtype(element).newbyteorder("<")).astype(np.float64)
    signed = {"int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64}
    if element in signed:
        return raw.view(signed[element]).astype(np.float64)
    return raw.astype(np.float64)


def _chunks(nbytes: int, itemsize: int) -> Iterator[tuple[int, int]]:
    """(byte offset, element count) pieces covering ``nbytes``."""
    step = max(itemsize, CHUNK_BYTES - CHUNK_BYTES % itemsize)
    count_total = nbytes // itemsize
    offset = 0
    while offset < count_total * itemsize:
        count = min(step // itemsize, count_total - offset // itemsize)
        yield offset, count
        offset += count * itemsize


def _raw(buffer: Buffer, itemsize: int, offset: int, count: int) -> np.ndarray:
    return buffer.view(_UINT[itemsize], byte_offset=offset, count=count)


# ----------------------------------------------------------------------------------------------------------
# Checks


def _param_failure(index: int, refs: Sequence[Param], cand: Param | None) -> str | None:
    ref = refs[0]
    if cand is None:
        return f"the candidate's kernel has no parameter {index}"
    if cand.kind != ref.kind:
        return f"parameter {index} is a {ref.kind} in the reference and a {cand.kind} in the candidate"
    if ref.kind == "scalar":
        stable = all(r.raw == ref.raw for r in refs)
        if stable and cand.raw != ref.raw:
            return (
                f"parameter {index} (a scalar) is 0x{ref.raw[::-1].hex()} in the reference and "
                f"0x{cand.raw[::-1].hex()} in the candidate"
            )
    elif ref.kind == "pointer":
        if cand.alloc_size != ref.alloc_size:
            return (
                f"parameter {index} points into an allocation of {ref.alloc_size} bytes in the reference "
                f"and of {cand.alloc_size} bytes in the candidate"
            )
        if all(r.alloc_offset == ref.alloc_offset for r in refs) and cand.alloc_offset != ref.alloc_offset:
            return (
                f"parameter {index} points {ref.alloc_offset} bytes into its allocation in the reference "
                f"and {cand.alloc_offset} bytes in the candidate"
            )
    return None


def _first_true(masks: Iterator[tuple[int, np.ndarray]]) -> int | None:
    """The byte offset of the first True over (chunk offset, mask) pieces."""
    for offset, mask in masks:
        hits = np.flatnonzero(mask)
        if hits.size:
            return offset + int(hits[0])
    return None


def _first_input_difference(pair: _Pair) -> int | None:
    """First byte where the candidate's snapshot before the kernel differs from the reference's, among the
    bytes on which all reference runs agree."""

    def masks() -> Iterator[tuple[int, np.ndarray]]:
        for offset, count in _chunks(pair.cand_before.nbytes, 1):
            refs = [_raw(b, 1, offset, count) for b in pair.refs_before]
            stable = np.ones(count, dtype=bool)
            for other in refs[1:]:
                stable &= other == refs[0]
            yield offset, (_raw(pair.cand_before, 1, offset, count) != refs[0]) & stable

    return _first_true(masks())


def _first_change(before: Buffer, after: Buffer) -> int | None:
    """First byte the kernel changed, or None."""
    if before.same_as(after):
        return None
    return _first_true(
        (offset, _raw(after, 1, offset, count) != _raw(before, 1, offset, count))
        for offset, count in _chunks(before.nbytes, 1)
    )


def written_params(reference: Sequence[Capture]) -> frozenset[int]:
    """The parameters whose buffer the reference's kernel changes at any launch of any run: its outputs."""
    written: set[int] = set()
    for capture in reference:
        for launch in capture.launches:
            for before in launch.buffers:
                if before.phase != "before" or before.param_index in written:
                    continue
                after = launch.buffer(before.param_index, "after")
                if after is not None and not before.same_as(after):
                    written.add(before.param_index)
    return frozenset(written)


@dataclass
class _Chunk:
    """One chunk of a written buffer, compared: values as float64, and which elements are out of bounds."""

    bad: np.ndarray
    candidate: np.ndarray
    reference: np.ndarray  # the reference runs' mean (float) or first run (exact)
    allowed: np.ndarray  # the allowed absolute difference per element
    abs_err: np.ndarray  # 0 where either side is not finite
    noise: np.ndarray  # the reference runs' standard deviation (float) or range (exact)
    nan_inf: int


def _values(raw: np.ndarray, element: str | None) -> np.ndarray:
    return raw.astype(np.float64) if element is None else _as_float(raw, element)


def _exact_chunk(refs: list[np.ndarray], cand: np.ndarray, element: str | None) -> _Chunk:
    """Integers and raw bytes: equal to the reference where its runs agree; within their range elsewhere."""
    first = _values(refs[0], element)
    lo, hi = first.copy(), first.copy()
    for raw in refs[1:]:
        values = _values(raw, element)
        np.minimum(lo, values, out=lo)
        np.maximum(hi, values, out=hi)
    c = _values(cand, element)
    return _Chunk(
        bad=(c < lo) | (c > hi),
        candidate=c,
        reference=first,
        allowed=hi - lo,
        abs_err=np.abs(c - first),
        noise=hi - lo,
        nan_inf=0,
    )


def _float_chunk(refs: list[np.ndarray], cand: np.ndarray, element: str, tolerance: Tolerance) -> _Chunk:
    reference = reference_stats(_as_float(raw, element) for raw in refs)
    c = _as_float(cand, element)
    check = check_floats(reference, c, tolerance)
    return _Chunk(
        bad=check.bad,
        candidate=c,
        reference=reference.mean,
        allowed=check.allowed,
        abs_err=check.abs_err,
        noise=reference.std,
        nan_inf=int(np.count_nonzero(check.nan_inf)),
    )


def _max_rel(abs_err: np.ndarray, ref: np.ndarray) -> float:
    nonzero = (ref != 0) & np.isfinite(ref)
    if not np.any(nonzero):
        return 0.0
    return float((abs_err[nonzero] / np.abs(ref[nonzero])).max())


def _bound_use(chunk: _Chunk) -> float:
    """The worst element's error over its bound in this chunk (inf where a nonzero error had no room, or
    where the candidate and the reference disagree on NaN or Inf)."""
    if chunk.nan_inf:
        return math.inf
    with np.errstate(divide="ignore", invalid="ignore"):
        use = np.where(
            chunk.allowed > 0, chunk.abs_err / chunk.allowed, np.where(chunk.abs_err > 0, np.inf, 0.0)
        )
    return float(use.max(initial=0.0))


def _noisy_elements(pair: _Pair, size: int, chunks: Sequence[tuple[int, int]]) -> int:
    """Elements of ``chunks`` of the output where the reference runs' bytes disagree after the kernel."""
    noisy = 0
    for offset, count in chunks:
        runs = [_raw(b, size, offset, count) for b in pair.refs_after]
        differ = np.zeros(count, dtype=bool)
        for other in runs[1:]:
            differ |= other != runs[0]
        noisy += int(np.count_nonzero(differ))
    return noisy


def _tolerance(pair: _Pair, atol: float, rtol: float, alpha: float, terms: int, noisy: int) -> Tolerance:
    """The tolerance of one float output with ``noisy`` elements where the reference runs disagree."""
    rounding = _UNIT_ROUNDOFF.get(pair.element or "", 0.0) * math.sqrt(max(terms, 1))
    noise_k = noise_factor(alpha, noisy, len(pair.refs_after))
    return Tolerance(atol=atol, rtol=rtol, rounding=rounding, noise_k=noise_k)


def _element_stats(
    pair: _Pair, atol: float, rtol: float, alpha: float, terms: int, rewritten: bool
) -> _ElementStats:
    """``rewritten``: the reference's kernel leaves every byte of this output as it was at this launch,
    so it rewrote them with the same bits (or wrote none): an element out of bounds is then a mismatch,
    not a write where the reference does not write."""
    element = pair.element
    size = _itemsize(element)
    stats = _ElementStats()
    # Chunks bit-identical to every reference run need nothing more (and their runs agree: no noise
    # there); the others are counted for noise first, since the noise bound depends on how many
    # elements of the output are noisy, then judged.
    differing = []
    for offset, count in _chunks(pair.cand_after.nbytes, size):
        cand = _raw(pair.cand_after, size, offset, count)
        if all(equal_bytes(_raw(b, size, offset, count), cand) for b in pair.refs_after):
            stats.checked += count
        else:
            differing.append((offset, count))
    tolerance = None
    if element is not None and not element.startswith(("int", "uint")):
        stats.noisy = _noisy_elements(pair, size, differing) if len(pair.refs_after) > 1 else 0
        tolerance = _tolerance(pair, atol, rtol, alpha, terms, stats.noisy)
    # element index 0 is the one the parameter points to; a capped snapshot starts at the pointer
    first_element = pair.pointer_offset // size
    for offset, count in differing:
        refs_after = [_raw(b, size, offset, count) for b in pair.refs_after]
        cand = _raw(pair.cand_after, size, offset, count)
        untouched = np.full(count, not rewritten, dtype=bool)
        for before, after in zip(pair.refs_before, pair.refs_after, strict=True):
            untouched &= _raw(before, size, offset, count) == _raw(after, size, offset, count)
        if tolerance is None:
            chunk = _exact_chunk(refs_after, cand, element)
        else:
            assert element is not None
            chunk = _float_chunk(refs_after, cand, element, tolerance)
        stats.checked += count
        stats.noise_max = max(stats.noise_max, float(chunk.noise.max(initial=0.0)))
        stats.max_abs = max(stats.max_abs, float(chunk.abs_err.max(initial=0.0)))
        stats.max_rel = max(stats.max_rel, _max_rel(chunk.abs_err, chunk.reference))
        stats.bound_use = max(stats.bound_use, _bound_use(chunk))
        stats.nan_inf += chunk.nan_inf
        hits = np.flatnonzero(chunk.bad)
        stats.mismatches += int(hits.size)
        stats.outside_untouched += int(np.count_nonzero(chunk.bad & ~untouched))
        if hits.size and stats.first is None:
            k = int(hits[0])
            stats.first = first_element + offset // size + k
            stats.first_values = (
                float(chunk.candidate[k]),
                float(chunk.reference[k]),
                float(chunk.allowed[k]),
            )
    return stats


# ----------------------------------------------------------------------------------------------------------
# Per launch


def _pairs(
    refs: Sequence[Launch],
    cand: Launch,
    types: list[ParamType] | None,
    default_element: str,
    override: str | None,
) -> tuple[list[_Pair], str | None]:
    """The allocations of one launch, or the reason the candidate's launch cannot be compared."""
    ref = refs[0]
    cand_params = {p.index: p for p in cand.params}
    if len(cand.params) != len(ref.params):
        return (
            [],
            f"the kernel takes {len(ref.params)} parameters in the reference and {len(cand.params)} "
            "in the candidate",
        )
    for param in ref.params:
        problem = _param_failure(
            param.index, [r.params[param.index] for r in refs], cand_params.get(param.index)
        )
        if problem:
            return [], problem
    pairs: list[_Pair] = []
    seen: set[int | None] = set()
    for param in ref.params:
        if param.kind != "pointer" or param.alloc_base in seen:
            continue
        seen.add(param.alloc_base)
        type_info = types[param.index] if types is not None and param.index < len(types) else None
        element = override or (
            element_type(type_info, default_element) if types is not None else default_element
        )
        snapshots = []
        for launch in (*refs, cand):
            before, after = launch.buffer(param.index, "before"), launch.buffer(param.index, "after")
            if before is None or after is None:
                raise ValidationError(
                    f"launch {launch.seq} has no snapshot of parameter {param.index}'s buffer"
                )
            snapshots.append((before, after))
        size = _itemsize(element)
        if (param.alloc_offset or 0) % size or any(
            b.nbytes % size or a.nbytes != b.nbytes for b, a in snapshots
        ):
            element = None
        if any(b.nbytes != snapshots[0][0].nbytes for b, _ in snapshots):
            return [], f"parameter {param.index}'s buffer was captured with different sizes"
        pairs.append(
            _Pair(
                param=param,
                type_info=type_info,
                element=element,
                refs_before=[b for b, _ in snapshots[:-1]],
                refs_after=[a for _, a in snapshots[:-1]],
                cand_before=snapshots[-1][0],
                cand_after=snapshots[-1][1],
                pointer_offset=snapshots[0][0].base - (param.pointer or snapshots[0][0].base),
                label=f"parameter {param.index}" + (f" ({type_info.text})" if type_info else ""),
            )
        )
    return pairs, None


def _compare_pair(
    pair: _Pair,
    atol: float,
    rtol: float,
    alpha: float,
    terms: int,
    output: bool,
    *,
    inputs: bool = True,
) -> tuple[BufferComparison, _Failure | None]:
    """``output``: the reference's kernel writes this parameter at some launch; ``inputs``: the candidate's
    bytes before the kernel must be the reference's (False for the end-to-end run's later launches, whose
    inputs may hold earlier launches' accepted drift)."""
    element_name = pair.element or "bytes"
    const = pair.type_info is not None and pair.type_info.const
    common = {"param": pair.param.index, "dtype": element_name, "bytes": pair.cand_after.nbytes}
    first_input = _first_input_difference(pair) if inputs else None
    if first_input is not None:
        byte = first_input + pair.pointer_offset
        message = (
            f"{pair.label}: the candidate's kernel was given different data than the reference's "
            f"(first differing element at index {byte // _itemsize(pair.element)} (byte {byte}) "
            "from the pointer)"
        )
        role = "input" if const else "untouched"
        return BufferComparison(role=role, passed=False, reason=message, **common), _Failure(
            "input_mismatch", message
        )
    if not output:
        role = "input" if const else "untouched"
        changed = _first_change(pair.cand_before, pair.cand_after)
        if changed is None:
            return BufferComparison(role=role, passed=True, **common), None
        kind = "input_modified" if const else "untouched_modified"
        what = "its input (a const parameter)" if const else "a buffer the reference leaves unchanged"
        size = _itemsize(pair.element)
        message = (
            f"{pair.label}: the candidate's kernel modified {what}; first changed element at index "
            f"{(changed + pair.pointer_offset) // size}"
        )
        return BufferComparison(role=role, passed=False, reason=message, **common), _Failure(kind, message)

    rewritten = all(b.same_as(a) for b, a in zip(pair.refs_before, pair.refs_after, strict=True))
    stats = _element_stats(pair, atol, rtol, alpha, terms, rewritten)
    failure = None
    reason = None
    if stats.mismatches:
        kind = "mismatch" if stats.outside_untouched else "untouched_modified"
        values = ""
        if stats.first_values is not None:
            cand_value, ref_value, bound = stats.first_values
            runs = len(pair.refs_after)
            center = f"reference mean of {runs} runs" if runs > 1 and pair.element else "reference"
            values = f": candidate {cand_value:.9g}, {center} {ref_value:.9g}, allowed difference {bound:.3g}"
        where = f"first at index {stats.first}{values}"
        if kind == "mismatch":
            noise = (
                f"; the reference's runs disagree at {stats.noisy} element(s), by a standard deviation of "
                f"up to {stats.noise_max:.3g}"
                if stats.noisy
                else ""
            )
            reason = (
                f"{pair.label}: {stats.mismatches} of {stats.checked} {element_name} elements differ from "
                f"the reference beyond tolerance ({stats.nan_inf} NaN/Inf disagreements); {where}; "
                f"max abs error {stats.max_abs:.3g}, max rel error {stats.max_rel:.3g}, worst element "
                f"{stats.bound_use:.3g} times its bound{noise}"
            )
        else:
            reason = (
                f"{pair.label}: the candidate's kernel wrote {stats.mismatches} element(s) the reference "
                f"leaves unchanged; {where}"
            )
        failure = _Failure(kind, reason)
    comparison = BufferComparison(
        role="output",
        passed=failure is None,
        max_abs_error=stats.max_abs,
        max_rel_error=stats.max_rel,
        first_mismatch=stats.first,
        mismatches=stats.mismatches,
        nan_inf_mismatches=stats.nan_inf,
        atol=atol,
        rtol=rtol,
        noise_max=stats.noise_max,
        noisy_elements=stats.noisy,
        bound_use=stats.bound_use,
        reason=reason,
        **common,
    )
    return comparison, failure


def _snapshot_key(pair: _Pair) -> tuple[object, ...]:
    """Identifies a pair's bytes: launches whose snapshots repeat earlier ones (SAME records share their
    bytes in the file) compare exactly alike, so a loop of identical launches is compared once."""
    snapshots = [*pair.refs_before, *pair.refs_after, pair.cand_before, pair.cand_after]
    return (
        pair.param.index,
        pair.element,
        pair.pointer_offset,
        pair.type_info.const if pair.type_info else None,
        *((b.source_id, b.file_offset, b.nbytes) for b in snapshots),
    )


def reference_disagrees(reference: Sequence[Capture]) -> bool:
    """Whether the reference runs' snapshots after any launch differ (noise to calibrate)."""
    _check_reference(reference)
    for position, launch in enumerate(reference[0].launches):
        for buffer in launch.buffers:
            if buffer.phase != "after":
                continue
            others = [capture.launches[position].buffer(buffer.param_index, "after") for capture in reference]
            if any(other is None or not buffer.same_as(other) for other in others[1:]):
                return True
    return False


def _terms(pairs: Sequence[_Pair]) -> int:
    """The elements of all of a launch's buffers: the most terms any of its outputs can be made of."""
    return sum(pair.cand_before.nbytes // _itemsize(pair.element or "float32") for pair in pairs)


def _decisive(failures: Sequence[tuple[int, _Failure]]) -> _Failure:
    tampering = [f for _, f in failures if f.kind == "input_modified"]
    crashes = [f for _, f in failures if f.kind == "crash"]
    if tampering and not crashes:
        return tampering[0]
    return failures[0][1]


def _launch_label(position: int, total: int, launch: Launch) -> str:
    return f"launch {position + 1} of {total} ({_name(launch)})"


def _launch_count_failure(ref_launches: Sequence[Launch], cand_launches: Sequence[Launch]) -> str | None:
    if len(cand_launches) == len(ref_launches):
        return None
    return (
        f"the reference launched {_describe_counts(_counts(ref_launches))}; the candidate launched "
        f"{_describe_counts(_counts(cand_launches))}"
    )


def _launch_errors(label: str, cand: Launch) -> _Failure | None:
    """The capture's error records for the candidate's launch: its inputs could not be restored (its
    buffers do not have the reference's sizes), or it did not run or finish."""
    if not cand.errors:
        return None
    kind = "input_mismatch" if any(e.startswith(RESTORE_FAILED) for e in cand.errors) else "crash"
    return _Failure(kind, f"{label}: {'; '.join(cand.errors)}")


def compare_captures(
    reference: Sequence[Capture],
    candidate: Capture,
    *,
    atol: float,
    rtol: float,
    default_element: str = "float32",
    element_override: str | None = None,
    alpha: float = DEFAULT_ALPHA,
    outputs: frozenset[int] | None = None,
) -> Comparison:
    """Compare ``candidate``, captured with each launch's inputs restored from the reference's first run,
    with the reference runs (at least one; more calibrate the noise), launch by launch. ``alpha`` is the
    chance per output that another draw of the reference's own noise fails it. ``outputs``: the parameters
    the reference's kernel writes, when the captures alone cannot tell (a reproducer holds one launch,
    which may rewrite an output with the bits it held); by default those it changes at some launch.

    Launches are paired in order. Raises ValidationError when the reference itself cannot serve as one
    (its runs launch differently, or a reference launch was not captured).
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError("alpha must be strictly between 0 and 1")
    _check_reference(reference)
    ref_launches = reference[0].launches
    count_problem = _launch_count_failure(ref_launches, candidate.launches)
    if count_problem is not None:
        return Comparison(False, "launch_count", count_problem, [], 0)
    written = written_params(reference) if outputs is None else outputs
    results: list[LaunchComparison] = []
    failures: list[tuple[int, _Failure]] = []
    noise_max = 0.0
    bound_use: float | None = None
    seen: dict[tuple[object, ...], tuple[BufferComparison, _Failure | None]] = {}
    for position, cand in enumerate(candidate.launches):
        refs = [capture.launches[position] for capture in reference]
        label = _launch_label(position, len(ref_launches), refs[0])
        errors = _launch_errors(label, cand)
        if errors is not None:
            failures.append((position, errors))
            results.append(LaunchComparison(launch=position, passed=False))
            continue
        types = parse_parameters(refs[0].demangled)
        pairs, problem = _pairs(refs, cand, types, default_element, element_override)
        if problem is not None:
            failures.append((position, _Failure("input_mismatch", f"{label}: {problem}")))
            results.append(LaunchComparison(launch=position, passed=False))
            continue
        terms = _terms(pairs)
        buffers = []
        launch_failures = []
        for pair in pairs:
            output = pair.param.index in written
            key = (terms, output, *_snapshot_key(pair))
            if key not in seen:
                seen[key] = _compare_pair(pair, atol, rtol, alpha, terms, output)
            comparison, failure = seen[key]
            buffers.append(comparison)
            noise_max = max(noise_max, comparison.noise_max or 0.0)
            if comparison.bound_use is not None:
                bound_use = max(bound_use or 0.0, comparison.bound_use)
            if failure is not None:
                launch_failures.append(_Failure(failure.kind, f"{label}, {failure.message}"))
        launch_failures.sort(key=lambda f: _FAILURE_ORDER.index(f.kind))
        failures.extend((position, f) for f in launch_failures)
        results.append(LaunchComparison(launch=position, passed=not launch_failures, buffers=buffers))
    return _verdict(failures, results, noise_max, bound_use)


def _verdict(
    failures: Sequence[tuple[int, _Failure]],
    results: list[LaunchComparison],
    noise_max: float,
    bound_use: float | None,
    what: str = "launches",
) -> Comparison:
    if not failures:
        return Comparison(True, None, None, results, len(results), noise_max, bound_use)
    first = _decisive(failures)
    failing = len({position for position, _ in failures})
    reason = first.message
    if failing > 1:
        reason += f" ({failing} of {len(results)} {what} fail)"
    return Comparison(False, first.kind, reason, results, len(results), noise_max, bound_use)


def compare_end_to_end(
    reference: Sequence[Capture],
    candidate: Capture,
    *,
    atol: float,
    rtol: float,
    default_element: str = "float32",
    element_override: str | None = None,
    alpha: float = DEFAULT_ALPHA,
) -> Comparison:
    """The candidate's own run (nothing restored) against the reference's: the same launches; the first
    launch given the same inputs; no parameter the reference never writes changed at any launch; and each
    output allocation, after the last launch that passes it, within its bound. Later launches' inputs may
    differ by the drift earlier launches were allowed: they are judged in isolation (compare_captures)."""
    _check_reference(reference)
    ref_launches = reference[0].launches
    count_problem = _launch_count_failure(ref_launches, candidate.launches)
    if count_problem is not None:
        return Comparison(False, "launch_count", f"end to end: {count_problem}", [], 0)
    written = written_params(reference)
    last_seen = _last_launch_of_each_output(ref_launches, written)
    failures: list[tuple[int, _Failure]] = []
    noise_max = 0.0
    bound_use: float | None = None
    for position, cand in enumerate(candidate.launches):
        refs = [capture.launches[position] for capture in reference]
        label = f"end to end, {_launch_label(position, len(ref_launches), refs[0])}"
        errors = _launch_errors(label, cand)
        if errors is not None:
            failures.append((position, errors))
            continue
        pairs, problem = _pairs(
            refs, cand, parse_parameters(refs[0].demangled), default_element, element_override
        )
        if problem is not None:
            failures.append((position, _Failure("input_mismatch", f"{label}: {problem}")))
            continue
        terms = _terms(pairs)
        for pair in pairs:
            output = pair.param.index in written
            final = last_seen.get(pair.param.alloc_base) == position
            if output and not final and position > 0:
                continue  # an intermediate state of an output: judged in isolation
            comparison, failure = _compare_pair(pair, atol, rtol, alpha, terms, output, inputs=position == 0)
            noise_max = max(noise_max, comparison.noise_max or 0.0)
            if comparison.bound_use is not None:
                bound_use = max(bound_use or 0.0, comparison.bound_use)
            if failure is not None:
                failures.append((position, _Failure(failure.kind, f"{label}, {failure.message}")))
    failures.sort(key=lambda item: (_FAILURE_ORDER.index(item[1].kind), item[0]))
    return _verdict(failures, [], noise_max, bound_use)


def _last_launch_of_each_output(launches: Sequence[Launch], written: frozenset[int]) -> dict[int | None, int]:
    """For each allocation an output parameter points into (by its base in the reference's first run), the
    position of the last launch that passes it."""
    last: dict[int | None, int] = {}
    for position, launch in enumerate(launches):
        for param in launch.params:
            if param.kind == "pointer" and param.index in written:
                last[param.alloc_base] = position
    return last


def combine(isolated: Comparison, end_to_end: Comparison) -> Comparison:
    """One verdict of both captures. Tampering first, as within one, unless a launch crashed; then a
    crash; then a different number of launches; then inputs that differ at the end-to-end run's first
    launch (a changed data layout, which makes the isolated launches' outputs meaningless); then what the
    isolated launches found; then the end-to-end run's outputs. The launches reported are the isolated
    ones."""
    noise_max = max(isolated.noise_max, end_to_end.noise_max)
    uses = [u for u in (isolated.bound_use, end_to_end.bound_use) if u is not None]
    bound_use = max(uses) if uses else None
    failed = [c for c in (isolated, end_to_end) if not c.passed]
    if not failed:
        return Comparison(
            True, None, None, isolated.launches, isolated.launches_compared, noise_max, bound_use
        )
    crashed = any(c.failure == "crash" for c in failed)

    def rank(comparison: Comparison) -> int:
        if comparison.failure == "input_modified" and not crashed:
            return 0
        if comparison.failure in ("crash", "launch_count"):
            return 1 if comparison.failure == "crash" else 2
        if comparison is end_to_end and comparison.failure == "input_mismatch":
            return 3
        return 4 if comparison is isolated else 5

    decisive = min(failed, key=rank)
    return Comparison(
        False,
        decisive.failure,
        decisive.reason,
        isolated.launches,
        isolated.launches_compared,
        noise_max,
        bound_use,
    )
