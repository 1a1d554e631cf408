# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The compiled evaluator: the same API and the same answers as flagproxy/_eval_py.py, in C.

Once per snapshot the compiler's model (flagproxy/compiler/model.py) is flattened into C arrays of
structs, laid out in evaluation order: flags, their strategies, the constraint ids of each strategy,
variant lists, variants, overrides, dependencies, and every list fragment in one contiguous blob.
Context fields get small integer slots (the six standard fields, then each property name the snapshot
reads), and equal constraints (segments, repeated appName/environment checks...) share one id.

Per request an `_Evaluation` resolves a slot the first time it is read and remembers every constraint's
answer, so each distinct constraint is decided once per request, however many flags use it. Rollout
hashes start from the MurmurHash3 state of "<group>:" computed at build time and only hash the
identifier. The body is assembled with one allocation and memcpy from the blob, whose main line holds
every flag's no-variant answer in flag order, so a run of flags that are on is one copy. Whole-list answers
go through plans: contexts whose plan constraints answer alike share the flags those answers decide, and
only the rest is walked per request (Engine._plan_key). Rare operators (dates,
semver, regex, CIDR, custom strategies) call the same Python helpers as the pure twin, so the two agree
by construction; their parsed context values are cached per slot for the length of one request.
"""

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF, Py_XDECREF
from cpython.unicode cimport PyUnicode_Tailmatch
from libc.math cimport fabs
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcpy, memset
from libc.time cimport gmtime_r, strftime, time_t, tm
from posix.time cimport CLOCK_REALTIME, clock_gettime, timespec


cdef extern from "Python.h":
    # Borrowed-pointer forms of a few C API calls, so the walk does no reference counting.
    const char* _utf8 "PyUnicode_AsUTF8AndSize"(PyObject* unicode, Py_ssize_t* size)
    int _set_contains "PySet_Contains"(PyObject* anyset, PyObject* key) except -1
    int PyUnicode_Contains(object container, object element) except -1
    object PyUnicode_DecodeASCII(const char* s, Py_ssize_t size, const char* errors)
    int PyErr_ExceptionMatches(PyObject* exc)
    void PyErr_Clear()
    PyObject* PyExc_UnicodeEncodeError


import os as _os
import time as _time

import orjson as _orjson

from flagproxy.compiler import model as _m
from flagproxy.compiler import values as _values
from flagproxy.compiler.fragments import BODY_PREFIX as _BODY_PREFIX
from flagproxy.compiler.fragments import BODY_SUFFIX as _BODY_SUFFIX
from flagproxy.compiler.fragments import unknown_named as _unknown_named

# The model's integer codes, read once so there is a single source for them.
cdef int FIELD_USER_ID = _m.FIELD_USER_ID
cdef int FIELD_SESSION_ID = _m.FIELD_SESSION_ID
cdef int FIELD_CURRENT_TIME = _m.FIELD_CURRENT_TIME
cdef int FIELD_REMOTE_ADDRESS = _m.FIELD_REMOTE_ADDRESS
cdef int FIELD_PROPERTY = _m.FIELD_PROPERTY
cdef int STICKY_DEFAULT = _m.STICKY_DEFAULT
cdef int STICKY_RANDOM = _m.STICKY_RANDOM
cdef int OP_IN = _m.OP_IN
cdef int OP_NOT_IN = _m.OP_NOT_IN
cdef int OP_STR_STARTS_WITH = _m.OP_STR_STARTS_WITH
cdef int OP_STR_ENDS_WITH = _m.OP_STR_ENDS_WITH
cdef int OP_STR_CONTAINS = _m.OP_STR_CONTAINS
cdef int OP_COMPARE = _m.OP_COMPARE
cdef int OP_REGEX = _m.OP_REGEX
cdef int OP_IN_CIDR = _m.OP_IN_CIDR
cdef int OP_FALSE = _m.OP_FALSE
cdef int CMP_EQ = _m.CMP_EQ
cdef int CMP_GT = _m.CMP_GT
cdef int CMP_GTE = _m.CMP_GTE
cdef int CMP_LT = _m.CMP_LT
cdef int KIND_NUMBER = _m.KIND_NUMBER
cdef int KIND_DATE = _m.KIND_DATE
cdef int KIND_SEMVER = _m.KIND_SEMVER
cdef int STRATEGY_DEFAULT = _m.STRATEGY_DEFAULT
cdef int STRATEGY_USER_WITH_ID = _m.STRATEGY_USER_WITH_ID
cdef int STRATEGY_GRADUAL_USER_ID = _m.STRATEGY_GRADUAL_USER_ID
cdef int STRATEGY_GRADUAL_SESSION_ID = _m.STRATEGY_GRADUAL_SESSION_ID
cdef int STRATEGY_GRADUAL_RANDOM = _m.STRATEGY_GRADUAL_RANDOM
cdef int STRATEGY_FLEXIBLE_ROLLOUT = _m.STRATEGY_FLEXIBLE_ROLLOUT
cdef int STRATEGY_REMOTE_ADDRESS = _m.STRATEGY_REMOTE_ADDRESS
cdef int STRATEGY_CONSTANT = _m.STRATEGY_CONSTANT
cdef int STRATEGY_CUSTOM = _m.STRATEGY_CUSTOM
cdef uint32_t VARIANT_SEED = _m.VARIANT_SEED
cdef enum:
    # A compile-time constant, so `% ROLLOUT_MODULUS` is a multiplication rather than a division (one per
    # rollout strategy per request). The module's import check below keeps it equal to the model's.
    ROLLOUT_MODULUS = 100
if ROLLOUT_MODULUS != _m.ROLLOUT_MODULUS:
    raise ImportError("flagproxy._eval was built for another rollout modulus than flagproxy.compiler.model")
cdef int64_t CACHE_NEVER = _m.CACHE_NEVER
cdef int64_t CACHE_SNAPSHOT = _m.CACHE_SNAPSHOT
cdef double FLOAT_EPSILON = 2.220446049250313e-16

_STANDARD_FIELDS = _m.STANDARD_FIELDS
_FIELD_CODES = _m.FIELD_CODES


cdef bint _plan_constraint(object c, int64_t now):
    """Whether the constraint's answer goes into plan keys: not when it is on a user or session id (they
    differ per user: a plan per user would be a cache of nothing), nor on currentTime, unless it compares
    it with a date that has passed (a missing currentTime then reads as now without bounding how long the
    answer holds, see _Evaluation.now_compared; any other reading of now bounds it to the second)."""
    if c.field == FIELD_USER_ID or c.field == FIELD_SESSION_ID:
        return False
    if c.field == FIELD_CURRENT_TIME:
        return c.op == OP_COMPARE and c.kind == KIND_DATE and 0 < c.flip <= now
    return True


# Slots 0..5 are the standard fields (their FIELD_* codes); properties the snapshot reads come after.
cdef int STANDARD_SLOTS = 6
# Stickiness in the C tables: a slot, or one of these.
cdef int STICK_DEFAULT = -1
cdef int STICK_RANDOM = -2
# Per-slot caches of parsed context values.
cdef int PARSED_DATE = 0
cdef int PARSED_SEMVER = 1
cdef int PARSED_ADDRESS = 2
cdef int PARSED_KINDS = 3


# ------------------------------------------------------------------------------------------- hashing

cdef inline uint32_t _rotl32(uint32_t x, int r) noexcept nogil:
    return (x << r) | (x >> (32 - r))


cdef inline uint32_t _mix_block(uint32_t h, uint32_t k) noexcept nogil:
    k *= 0xCC9E2D51U
    k = _rotl32(k, 15)
    k *= 0x1B873593U
    h ^= k
    h = _rotl32(h, 13)
    return h * 5 + 0xE6546B64U


cdef inline uint32_t _read_block(const uint8_t* data) noexcept nogil:
    return (<uint32_t>data[0] | (<uint32_t>data[1] << 8) | (<uint32_t>data[2] << 16)
            | (<uint32_t>data[3] << 24))


cdef inline uint32_t _finish(uint32_t h, uint32_t k, Py_ssize_t total) noexcept nogil:
    """Mix the tail word k (0 when there is no tail) and finalise for a message of `total` bytes."""
    if total & 3:
        k *= 0xCC9E2D51U
        k = _rotl32(k, 15)
        k *= 0x1B873593U
        h ^= k
    h ^= <uint32_t>total
    h ^= h >> 16
    h *= 0x85EBCA6BU
    h ^= h >> 13
    h *= 0xC2B2AE35U
    h ^= h >> 16
    return h


cdef inline uint32_t _tail_word(const uint8_t* data, Py_ssize_t length) noexcept nogil:
    cdef uint32_t k = 0
    if length >= 3:
        k ^= <uint32_t>data[2] << 16
    if length >= 2:
        k ^= <uint32_t>data[1] << 8
    if length >= 1:
        k ^= data[0]
    return k


ctypedef struct HashPrefix:
    # MurmurHash3 x86_32 state after the whole 4-byte blocks of "<group>:", and the 0..3 bytes left
    # over, packed little-endian as the start of the next block.
    uint32_t state
    uint32_t carry
    int32_t carry_len
    int32_t length


cdef void _prefix_init(HashPrefix* prefix, str group, uint32_t seed) except *:
    cdef bytes encoded = (group + ":").encode("utf-8", "surrogatepass")
    cdef const uint8_t* data = <const uint8_t*>PyBytes_AS_STRING(encoded)
    cdef Py_ssize_t length = PyBytes_GET_SIZE(encoded)
    cdef Py_ssize_t nblocks = length // 4
    cdef Py_ssize_t i
    cdef uint32_t h = seed
    if length > 0x3FFFFFFF:
        raise ValueError("hash group too long")
    for i in range(nblocks):
        h = _mix_block(h, _read_block(data + 4 * i))
    prefix.state = h
    prefix.length = <int32_t>length
    prefix.carry_len = <int32_t>(length - nblocks * 4)
    prefix.carry = _tail_word(data + nblocks * 4, prefix.carry_len)


cdef inline uint32_t _bucket(
    const HashPrefix* prefix, const uint8_t* data, Py_ssize_t length, uint32_t modulus
) noexcept nogil:
    return _hash(prefix, data, length) % modulus + 1


cdef inline uint32_t _rollout_bucket(const HashPrefix* prefix, const uint8_t* data, Py_ssize_t length) noexcept nogil:
    return _hash(prefix, data, length) % ROLLOUT_MODULUS + 1


cdef inline uint32_t _hash(const HashPrefix* prefix, const uint8_t* data, Py_ssize_t length) noexcept nogil:
    """murmur3("<group>:<identifier>") from the identifier's UTF-8 bytes; the group's part of the hash was
    done at build time. Callers reduce it to a bucket."""
    cdef uint32_t h = prefix.state
    cdef uint32_t k = prefix.carry
    cdef Py_ssize_t total = prefix.length + length
    cdef int carry = prefix.carry_len
    cdef int i
    if carry:
        if length < 4 - carry:  # prefix leftovers and identifier together are the tail
            for i in range(length):
                k |= <uint32_t>data[i] << (8 * (carry + i))
            return _finish(h, k, total)
        for i in range(4 - carry):
            k |= <uint32_t>data[i] << (8 * (carry + i))
        h = _mix_block(h, k)
        data += 4 - carry
        length -= 4 - carry
    while length >= 4:
        h = _mix_block(h, _read_block(data))
        data += 4
        length -= 4
    return _finish(h, _tail_word(data, length), total)


cdef enum:
    SPLIT_BLOCKS = 16  # identifiers up to 64 bytes are split once per request; longer ones use _hash


ctypedef struct SplitIdentifier:
    # An identifier's bytes cut once per request for each of the four ways a prefix can leave 0..3 bytes
    # over: the bytes that complete the prefix's last block (shifted into place), the whole blocks after
    # them with MurmurHash3's k half of the block step already done (it does not depend on the running
    # hash, so it need not be redone for each of the thousands of flags hashing the same userId), and the
    # tail word. _split_hash then gives what _hash gives, for any prefix.
    uint32_t head[4]
    uint32_t tail[4]
    int32_t n_blocks[4]
    uint32_t blocks[4][SPLIT_BLOCKS]
    int32_t length


cdef inline uint32_t _mix_k(uint32_t k) noexcept nogil:
    k *= 0xCC9E2D51U
    k = _rotl32(k, 15)
    return k * 0x1B873593U


cdef void _split_init(SplitIdentifier* split, const uint8_t* data, Py_ssize_t length) noexcept nogil:
    """`length` is at most 4 * SPLIT_BLOCKS."""
    cdef int carry, i, j, start, n
    cdef uint32_t head
    split.length = <int32_t>length
    for carry in range(4):
        head = 0
        start = 0
        if carry:
            start = 4 - carry if length >= 4 - carry else <int>length
            for i in range(start):
                head |= <uint32_t>data[i] << (8 * (carry + i))
        split.head[carry] = head
        n = <int>((length - start) // 4)
        for j in range(n):
            split.blocks[carry][j] = _mix_k(_read_block(data + start + 4 * j))
        split.n_blocks[carry] = n
        split.tail[carry] = _tail_word(data + start + 4 * n, length - start - 4 * n)


cdef inline uint32_t _split_hash(const HashPrefix* prefix, const SplitIdentifier* split) noexcept nogil:
    """_hash(prefix, the identifier's bytes) from the identifier's split."""
    cdef uint32_t h = prefix.state
    cdef int carry = prefix.carry_len
    cdef Py_ssize_t total = prefix.length + split.length
    cdef const uint32_t* blocks = split.blocks[carry]
    cdef int j
    if carry:
        if split.length < 4 - carry:  # prefix leftovers and identifier together are the tail
            return _finish(h, prefix.carry | split.head[carry], total)
        h = _mix_block(h, prefix.carry | split.head[carry])
    for j in range(split.n_blocks[carry]):
        h ^= blocks[j]
        h = _rotl32(h, 13)
        h = h * 5 + 0xE6546B64U
    return _finish(h, split.tail[carry], total)


def normalized_hash(str group, str identifier, uint32_t modulus, uint32_t seed=0):
    """For tests: the same function as flagproxy._murmur_py.normalized_hash."""
    cdef HashPrefix prefix
    cdef bytes encoded = identifier.encode("utf-8", "surrogatepass")
    _prefix_init(&prefix, group, seed)
    return _bucket(&prefix, <const uint8_t*>PyBytes_AS_STRING(encoded), len(encoded), modulus)


# ------------------------------------------------------------------------------------------- randomness

cdef uint64_t _rng_state = int.from_bytes(_os.urandom(8), "little") | 1


cdef inline uint32_t _random_between_1_and(uint32_t upper) noexcept:
    """Uniform enough in 1..upper (xorshift64*; rollouts need no cryptographic randomness)."""
    global _rng_state
    _rng_state ^= _rng_state >> 12
    _rng_state ^= _rng_state << 25
    _rng_state ^= _rng_state >> 27
    return <uint32_t>(((_rng_state * 0x2545F4914F6CDD1DULL) >> 32) % upper) + 1


# ------------------------------------------------------------------------------------------ the tables

ctypedef struct Constraint:
    int32_t slot
    int32_t op
    int32_t cmp
    int32_t kind
    uint8_t inverted
    uint8_t case_insensitive
    uint8_t empty
    double number
    int64_t flip  # a date comparison of now: the second its answer changes (model.Constraint.flip), 0: any
    PyObject* values  # frozenset, tuple of str, regex or None, networks, or a comparison target

ctypedef struct Strategy:
    int32_t kind
    int32_t constraints  # first index in Engine._constraint_ids
    int32_t n_constraints
    int32_t percentage
    int32_t stickiness  # STICK_DEFAULT, STICK_RANDOM or a slot
    int32_t variants  # index in Engine._lists, -1: none
    uint8_t constant
    uint8_t has_group
    int32_t member  # userWithId: its membership test (see Engine.member_index)
    HashPrefix group
    PyObject* extra  # networks tuple, or (custom strategy, parameters)

ctypedef struct VariantList:
    int32_t variants  # first index in Engine._variants
    int32_t n_variants
    uint32_t total
    int32_t stickiness  # STICK_DEFAULT or a slot
    uint8_t has_overrides
    HashPrefix group

ctypedef struct Variant:
    uint32_t weight
    int32_t outcome
    int32_t overrides  # first index in Engine._overrides
    int32_t n_overrides
    PyObject* name

ctypedef struct Override:
    int32_t slot
    int32_t member  # its membership test (see Engine.member_index)

ctypedef struct Dependency:
    int32_t parent
    uint8_t enabled
    PyObject* variants  # non-empty frozenset, or NULL: any variant

ctypedef struct Flag:
    uint8_t enabled
    uint8_t broken
    uint8_t has_strategies
    int32_t strategies  # first index in Engine._strategies
    int32_t n_strategies
    int32_t variants  # index in Engine._lists, -1: none
    int32_t dependencies  # first index in Engine._dependencies
    int32_t n_dependencies
    int32_t fragments  # outcome i's list fragment is Engine._fragments[fragments + i]
    int32_t disabled  # the /proxy/all fragment of the flag when it is off
    HashPrefix rollout  # "<name>:", seed 0: rollouts without a groupId

ctypedef struct Fragment:
    const char* data
    Py_ssize_t size


cdef void* _table(Py_ssize_t count, size_t size) except NULL:
    cdef void* table = calloc(count if count > 0 else 1, size)
    if table == NULL:
        raise MemoryError()
    return table


cdef void* _shrink(void* table, size_t size) noexcept:
    """The table cut down to `size` bytes (or left as it is if realloc fails: it is only bigger)."""
    cdef void* smaller = realloc(table, size if size > 0 else 1)
    return smaller if smaller != NULL else table


cdef void* _joined(const void* first, Py_ssize_t n_first, const void* second, Py_ssize_t n_second, size_t size) except NULL:
    """A new table: `first`'s rows, then `second`'s (Engine.patched)."""
    cdef char* table = <char*>_table(n_first + n_second, size)
    memcpy(table, first, n_first * size)
    memcpy(table + n_first * size, second, n_second * size)
    return table


cdef inline Py_ssize_t _add_part(Fragment* parts, Py_ssize_t count, const Fragment* fragment) noexcept:
    """Appends a fragment to a body's parts, and returns the new count. A fragment that follows the last
    part on the main line (one comma between them) extends that part instead: one memcpy for the run."""
    cdef Fragment* last
    if count:
        last = &parts[count - 1]
        if last.data + last.size + 1 == fragment.data and last.data[last.size] == 44:  # b","
            last.size += fragment.size + 1
            return count
    parts[count] = fragment[0]
    return count + 1


# Plans (Engine._plan_key): a context's answers of the snapshot's plan constraints decide most flags for
# every user who shares them; a plan keeps those answers and leaves the rest to walk.
cdef int32_t UNDECIDED = -2
cdef Py_ssize_t PLAN_BYTES_LIMIT = 8 * 1024 * 1024  # per snapshot and worker; the oldest plans go first
cdef Py_ssize_t PLAN_SEEN_LIMIT = 4096  # keys seen once remembered, before the doorkeeper starts over
cdef Py_ssize_t PLAN_OVERHEAD = 200  # the object, its dict slot, roughly
cdef Py_ssize_t PLAN_CONSTRAINTS_FREE = 256  # more plan constraints than this and than flags: no plans


ctypedef struct Walk:
    int32_t candidates  # index of the flag's first candidate in _Plan.candidates
    int32_t n  # how many; -1: walk the flag as _outcome does (it has dependencies)
    int32_t quick  # index in _Plan.quick when the flag has a quick record (see Quick), else -1


ctypedef struct Quick:
    # A walked flag whose plan leaves it one strategy, whose constraints the plan key has decided hold: a
    # default-stickiness flexibleRollout (or one that surely holds, when only its variant is left to pick).
    # What the walk reads of it is here, in walk order, so a request reads one 32-byte record per such flag
    # instead of the flag's and the strategy's rows, spread over tables that do not fit in the CPU's caches.
    HashPrefix prefix  # the rollout's group ("<groupId>:" or "<flag name>:")
    int32_t list  # the variant list to pick from when it holds, -1: none (the answer is outcome 0)
    int32_t fragments  # the flag's Flag.fragments and Flag.disabled
    int32_t disabled
    uint8_t percentage
    uint8_t always  # the strategy holds whatever the identifier (a default strategy, a constant on)
    uint8_t hashed_variants  # the list picks by the default stickiness's hash alone (no overrides, weight)


@cython.final
@cython.no_gc
cdef class _Plan:
    """The body of a context's plan key: steps in flag order, each a fixed part (-1 - index into parts)
    or a flag to walk (its index). The k-th flag to walk has walks[k]: the strategies the plan
    constraints' answers leave it (see Engine._plan_candidates), or n = -1 to walk it whole."""

    cdef int32_t* steps
    cdef Fragment* parts
    cdef Walk* walks
    cdef Quick* quick
    cdef int32_t* candidates
    cdef Py_ssize_t n_steps
    cdef Py_ssize_t walked  # steps that are flags
    cdef Py_ssize_t n_quick  # walked flags with a quick record
    cdef Py_ssize_t size  # bytes it holds, for the bound

    def __dealloc__(self):
        free(self.steps)
        free(self.parts)
        free(self.walks)
        free(self.quick)
        free(self.candidates)


cdef object _constraint_key(object c, int slot):
    """Two constraints with equal keys give the same answer for every context."""
    values = c.values
    if c.op == OP_REGEX:
        values = None if values is None else (values.pattern, values.flags)
    key = (slot, c.op, c.inverted, c.case_insensitive, c.cmp, c.kind, type(values), values)
    try:
        hash(key)
    except TypeError:  # not a value the compiler makes today; such a constraint is simply not shared
        return ("unshared", id(c))
    return key


# ------------------------------------------------------------------------------------------- the context

cdef object _property_text(object value):
    if type(value) is str:
        return value
    if isinstance(value, str):
        return str(value)
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _orjson.dumps(value).decode()  # JSON's shortest form: 12.0 -> "12.0", as serde_json writes it
    return None


cdef class Engine


@cython.final
cdef class _Cursor:
    """Next free index of each table while the tables are filled."""

    cdef int32_t strategies, constraint_refs, lists, variants, overrides, dependencies, fragments, members


@cython.final
@cython.freelist(4)
@cython.no_gc  # nothing it refers to can refer back to it, so it is never part of a cycle
cdef class _Evaluation:
    """One request's view of the context: slots resolved on first read, constraint answers remembered,
    and what the answer's cache validity is (randomness, custom strategies, the clock)."""

    cdef Engine engine  # keeps the tables alive while this evaluation points into them
    cdef dict source  # the context as a dict
    cdef dict properties  # its "properties" as a dict, or None
    cdef tuple slot_names
    cdef const Constraint* constraints
    cdef void* block  # one allocation for every per-request array below
    cdef PyObject** values  # per slot, owned; NULL: missing
    cdef PyObject** parsed  # PARSED_KINDS per slot, owned; NULL: not parsed yet
    cdef const char** utf8  # per slot: the UTF-8 bytes of its constraint view; NULL: not encoded yet
    cdef Py_ssize_t* utf8_size
    cdef list keep  # UTF-8 copies of strings with lone surrogates
    cdef double* numbers
    cdef uint8_t* resolved
    cdef uint8_t* number_state  # 0: not parsed yet, 1: not a number, 2: numbers[slot]
    cdef uint8_t* memo  # per constraint: 0 not decided yet, 1 false, 2 true
    cdef uint8_t* members  # a bit per membership test: the slot's value is in its set
    cdef uint8_t* members_known  # per slot: 0 not looked up yet, 1 listed nowhere, 2 membership bits set
    cdef int n_slots
    cdef object now  # currentTime standing in for a missing one, as text
    cdef object now_ns  # and as a date, in nanoseconds
    cdef int64_t second
    cdef bint clock_read
    cdef bint bounded  # the clock bounds how long the answer holds:
    cdef int64_t until  # up to this second
    cdef bint never
    cdef uint8_t split_state  # the default stickiness's identifier: 0 not split yet, 1 none or too long, 2 split
    cdef SplitIdentifier split

    def __dealloc__(self):
        cdef int i
        if self.block != NULL:
            for i in range(self.n_slots):
                Py_XDECREF(self.values[i])
            for i in range(self.n_slots * PARSED_KINDS):
                Py_XDECREF(self.parsed[i])
            free(self.block)

    cdef int start(self, Engine engine, object raw) except -1:
        cdef int n = engine.n_slots
        cdef Py_ssize_t size = n * (
            sizeof(PyObject*) * (1 + PARSED_KINDS) + sizeof(char*) + sizeof(Py_ssize_t) + sizeof(double) + 3
        ) + engine.n_constraints + (engine.n_members + 7) // 8
        cdef char* block
        cdef object raw_properties
        self.source = raw if type(raw) is dict else dict(raw)
        raw_properties = self.source.get("properties")
        if raw_properties is not None and type(raw_properties) is not dict:
            raw_properties = dict(raw_properties) if hasattr(raw_properties, "keys") else None
        self.properties = raw_properties
        self.engine = engine
        self.slot_names = engine.slot_names
        self.constraints = engine._constraints
        block = <char*>calloc(size if size > 0 else 1, 1)
        if block == NULL:
            raise MemoryError()
        self.block = block
        self.n_slots = n
        self.values = <PyObject**>block
        self.parsed = self.values + n
        self.utf8 = <const char**>(self.parsed + n * PARSED_KINDS)
        self.utf8_size = <Py_ssize_t*>(self.utf8 + n)
        self.numbers = <double*>(self.utf8_size + n)
        self.resolved = <uint8_t*>(self.numbers + n)
        self.number_state = self.resolved + n
        self.members_known = self.number_state + n
        self.memo = self.members_known + n
        self.members = self.memo + engine.n_constraints
        return 0

    # Slots --------------------------------------------------------------------------------------------

    cdef inline PyObject* value(self, int slot) except? NULL:
        """A slot's text as normalised like Yggdrasil's `Context::from_map` (evaluation.md 2.2), borrowed;
        NULL when missing."""
        if not self.resolved[slot]:
            self.resolve(slot)
        return self.values[slot]

    cdef int resolve(self, int slot) except -1:
        cdef object text = None
        cdef str name = self.slot_names[slot]
        cdef object found
        if slot < STANDARD_SLOTS:
            # The top level wins, even when its value is unusable; else the property is promoted.
            if name in self.source:
                found = self.source[name]
                text = found if type(found) is str else _property_text(found)
            elif self.properties is not None:
                text = _property_text(self.properties.get(name))
        elif name in _FIELD_CODES:
            # A standard name read as a property (variant stickiness "currentTime"): it was promoted to
            # the standard field unless the top level had that field.
            if self.properties is not None and name in self.source:
                text = _property_text(self.properties.get(name))
        else:
            found = self.source.get(name) if name != "properties" else None
            if type(found) is str:
                text = found  # a top-level string wins over properties
            elif self.properties is not None:
                text = _property_text(self.properties.get(name))
        if text is not None:
            Py_INCREF(text)
            self.values[slot] = <PyObject*>text
        self.resolved[slot] = 1
        return 0

    cdef inline PyObject* constraint_value(self, int slot) except? NULL:
        """A constraint's or rollout's field: a missing currentTime reads as now (Yggdrasil)."""
        cdef PyObject* found = self.value(slot)
        if found == NULL and slot == FIELD_CURRENT_TIME:
            return self.now_text()
        return found

    cdef inline const char* seed(self, int slot, Py_ssize_t* size) except? NULL:
        """The UTF-8 bytes of a slot's constraint view, for hashing; NULL when it is missing."""
        if self.utf8[slot] == NULL and self.encode(slot) == 0:
            return NULL
        size[0] = self.utf8_size[slot]
        return self.utf8[slot]

    cdef inline const SplitIdentifier* default_split(self) except? NULL:
        """The split of what default stickiness hashes (userId, else sessionId), made once per request;
        NULL when neither is there (randomness decides) or it is too long to split (_hash does it)."""
        if self.split_state == 2:
            return &self.split
        if self.split_state == 0:
            return self.make_split()
        return NULL

    cdef const SplitIdentifier* make_split(self) except? NULL:
        cdef const char* data
        cdef Py_ssize_t size
        self.split_state = 1
        data = self.seed(FIELD_USER_ID, &size)
        if data == NULL:
            data = self.seed(FIELD_SESSION_ID, &size)
        if data == NULL or size > 4 * SPLIT_BLOCKS:
            return NULL
        _split_init(&self.split, <const uint8_t*>data, size)
        self.split_state = 2
        return &self.split

    cdef int encode(self, int slot) except -1:
        """0 when the slot is missing, else 1 and its UTF-8 bytes in utf8[slot] and utf8_size[slot]."""
        cdef PyObject* text = self.constraint_value(slot)
        cdef const char* data
        cdef bytes fallback
        if text == NULL:
            return 0
        data = _utf8(text, &self.utf8_size[slot])
        if data == NULL:
            if not PyErr_ExceptionMatches(PyExc_UnicodeEncodeError):
                return -1
            PyErr_Clear()  # lone surrogates: hash the bytes Python would write
            fallback = (<object>text).encode("utf-8", "surrogatepass")
            if self.keep is None:
                self.keep = []
            self.keep.append(fallback)
            data = PyBytes_AS_STRING(fallback)
            self.utf8_size[slot] = PyBytes_GET_SIZE(fallback)
        self.utf8[slot] = data
        return 1

    # The clock and randomness --------------------------------------------------------------------------

    cdef int read_clock(self) except -1:
        """The one clock reading of this evaluation: every use of "now" sees the same second."""
        cdef timespec ts
        if not self.clock_read:
            clock_gettime(CLOCK_REALTIME, &ts)
            self.second = ts.tv_sec
            self.clock_read = True
        return 0

    cdef PyObject* now_text(self) except NULL:
        cdef time_t second
        cdef tm parts
        cdef char text[64]
        cdef size_t length
        if self.now is None:
            self.read_clock()
            second = <time_t>self.second
            if gmtime_r(&second, &parts) == NULL:
                raise OverflowError("the clock is out of range")
            length = strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &parts)
            self.now = PyUnicode_DecodeASCII(text, length, NULL)
            self.hold_until(self.second)  # whatever reads the text may change at the next second
        return <PyObject*>self.now

    cdef bint now_compared(self, const Constraint* c) except -1:
        """A date constraint on a missing currentTime: now against its target (now as parse_date makes it
        of now_text(), without the text), and how long that answer stands."""
        if self.now_ns is None:
            self.read_clock()
            self.now_ns = self.second * 1_000_000_000
        if c.flip == 0:
            self.hold_until(self.second)
        elif self.second < c.flip:
            self.hold_until(c.flip - 1)
        return _compare_objects(c, self.now_ns)

    cdef inline void hold_until(self, int64_t second) noexcept:
        if not self.bounded or second < self.until:
            self.until = second
            self.bounded = True

    cdef inline uint32_t random(self, uint32_t upper) noexcept:
        self.never = True
        return _random_between_1_and(upper)

    cdef inline int64_t valid_in(self) noexcept:
        if self.never:
            return CACHE_NEVER
        if self.bounded:
            return self.until if self.until > 0 else CACHE_NEVER
        return CACHE_SNAPSHOT

    # Parsed context values -----------------------------------------------------------------------------

    cdef int number(self, int slot, PyObject* text, double* out) except -1:
        """1 and the number in out when the slot's text is a number (Rust's f64::from_str), else 0."""
        cdef object found
        if self.number_state[slot] == 0:
            found = _parse_shared(_NUMBERS, _values.parse_context_number, text)
            if found is None:
                self.number_state[slot] = 1
            else:
                self.numbers[slot] = found
                self.number_state[slot] = 2
        if self.number_state[slot] == 2:
            out[0] = self.numbers[slot]
            return 1
        return 0

    cdef object parsed_value(self, int slot, int kind, PyObject* text):
        """A date (nanoseconds), semver key or address, parsed once per request; None if it does not parse."""
        cdef PyObject** cell = &self.parsed[slot * PARSED_KINDS + kind]
        cdef object found
        if cell[0] == NULL:
            if kind == PARSED_DATE:
                found = _values.parse_date(<object>text)
            elif kind == PARSED_SEMVER:
                found = _parse_shared(_SEMVER_KEYS, _values.semver_key, text)
            else:
                found = _parse_shared(_ADDRESSES, _values.parse_address, text)
            Py_INCREF(found)
            cell[0] = <PyObject*>found
        return <object>cell[0]

    # Memberships and constraints -----------------------------------------------------------------------

    cdef int know_members(self, int slot) except -1:
        """Sets the bits of every membership test (userWithId, overrides) whose set holds the slot's value:
        one dict lookup per slot and request instead of one set lookup per test. members_known[slot] is then
        1 when no test lists the value, 2 when some does."""
        cdef object found = None
        cdef PyObject* value = self.value(slot)
        if value != NULL:
            found = (<dict>self.engine.member_index[slot]).get(<object>value)
        if found is None:
            self.members_known[slot] = 1
            return 0
        for other in <tuple>found:
            self.members[<int32_t>other >> 3] |= 1 << (<int32_t>other & 7)
        self.members_known[slot] = 2
        return 0

    cdef inline bint is_member(self, int slot, int32_t member) except -1:
        """Whether the slot's value is in the set of membership test `member`."""
        if not self.members_known[slot]:
            self.know_members(slot)
        return (self.members[member >> 3] >> (member & 7)) & 1

    cdef inline bint listed(self, int slot) except -1:
        """Whether any membership test's set holds the slot's value."""
        if not self.members_known[slot]:
            self.know_members(slot)
        return self.members_known[slot] == 2

    cdef inline bint holds(self, uint32_t index) except -1:
        cdef uint8_t known = self.memo[index]
        cdef bint result
        if known:
            return known == 2
        result = _constraint_holds(&self.constraints[index], self)
        self.memo[index] = 2 if result else 1
        return result

    def as_dict(self):
        """The context as a custom strategy receives it: the standard fields and every property."""
        found = {}
        properties = {}
        if self.properties is not None:
            for key, value in self.properties.items():
                text = _property_text(value)
                if text is not None:
                    properties[key] = text
        for code, name in enumerate(_STANDARD_FIELDS):
            if name not in self.source:
                properties.pop(name, None)
            if self.value(code) != NULL:
                found[name] = <object>self.values[code]
        for key, value in self.source.items():
            if type(value) is str and key != "properties" and key not in _FIELD_CODES:
                properties[key] = value
        found["properties"] = properties
        return found


# ------------------------------------------------------------------------------------------ constraints

# Context values parsed by the Python helpers, shared by all requests: app versions, numbers and addresses
# repeat across users, and parsing a semver version costs more than evaluating a hundred flags.
cdef dict _NUMBERS = {}
cdef dict _SEMVER_KEYS = {}
cdef dict _ADDRESSES = {}
cdef Py_ssize_t SHARED_PARSE_LIMIT = 4096
cdef object _NOT_PARSED = object()


cdef object _parse_shared(dict cache, object parse, PyObject* text):
    cdef object found = cache.get(<object>text, _NOT_PARSED)
    if found is _NOT_PARSED:
        found = parse(<object>text)
        if len(cache) >= SHARED_PARSE_LIMIT:
            cache.clear()
        cache[<object>text] = found
    return found


cdef bint _any_affix(str text, object candidates, int direction) except -1:
    cdef object candidate
    for candidate in <tuple>candidates:
        if PyUnicode_Tailmatch(text, candidate, 0, len(text), direction):
            return True
    return False


cdef bint _compare_numbers(const Constraint* c, double number) noexcept:
    if c.cmp == CMP_EQ:
        return fabs(number - c.number) < FLOAT_EPSILON
    if c.cmp == CMP_GT:
        return number > c.number
    if c.cmp == CMP_GTE:
        return number >= c.number
    if c.cmp == CMP_LT:
        return number < c.number
    return number <= c.number


cdef bint _compare_objects(const Constraint* c, object actual) except -1:
    cdef object target = <object>c.values
    if actual is None:
        return False
    if c.cmp == CMP_EQ:
        return actual == target
    if c.cmp == CMP_GT:
        return actual > target
    if c.cmp == CMP_GTE:
        return actual >= target
    if c.cmp == CMP_LT:
        return actual < target
    return actual <= target


cdef bint _operator_holds(const Constraint* c, PyObject* value, _Evaluation ev) except -1:
    cdef int op = c.op
    cdef str text
    cdef object candidate
    cdef object address
    cdef double number
    if op == OP_STR_STARTS_WITH or op == OP_STR_ENDS_WITH:
        text = (<str><object>value).lower() if c.case_insensitive else <str><object>value
        return _any_affix(text, <object>c.values, -1 if op == OP_STR_STARTS_WITH else 1)
    if op == OP_STR_CONTAINS:
        text = (<str><object>value).lower() if c.case_insensitive else <str><object>value
        for candidate in <tuple><object>c.values:
            if PyUnicode_Contains(text, candidate):
                return True
        return False
    if op == OP_COMPARE:
        if c.kind == KIND_NUMBER:
            return ev.number(c.slot, value, &number) and _compare_numbers(c, number)
        if c.kind == KIND_DATE:
            return _compare_objects(c, ev.parsed_value(c.slot, PARSED_DATE, value))
        return _compare_objects(c, ev.parsed_value(c.slot, PARSED_SEMVER, value))
    if op == OP_REGEX:
        return <object>c.values is not None and _values.regex_matches(<object>c.values, <object>value)
    if op == OP_IN_CIDR:
        address = ev.parsed_value(c.slot, PARSED_ADDRESS, value)
        return address is not None and _values.networks_contain(<object>c.values, address)
    return False


cdef bint _constraint_holds(const Constraint* c, _Evaluation ev) except -1:
    cdef int op = c.op
    cdef PyObject* value
    cdef bint result
    if op == OP_IN:
        if c.empty:
            result = False
        else:
            value = ev.constraint_value(c.slot)
            result = value != NULL and _set_contains(c.values, value)
    elif op == OP_NOT_IN:
        if c.empty:
            result = True
        else:
            value = ev.constraint_value(c.slot)
            result = value == NULL or not _set_contains(c.values, value)
    elif op == OP_FALSE:
        return False
    else:
        value = ev.value(c.slot)
        if value == NULL and c.slot == FIELD_CURRENT_TIME:  # a missing currentTime reads as now
            if op == OP_COMPARE and c.kind == KIND_DATE:
                return ev.now_compared(c) != c.inverted
            value = ev.now_text()
        result = False if value == NULL else _operator_holds(c, value, ev)
    return result != c.inverted


# ------------------------------------------------------------------------------------------ strategies

cdef const char* _random_seed(_Evaluation ev, char* digits, Py_ssize_t* size) noexcept:
    """A random rollout seed, 1..9999 in decimal as Yggdrasil makes it, written into digits."""
    cdef uint32_t number = ev.random(9999)
    cdef int length = 0, i
    cdef char reversed_digits[8]
    while True:
        reversed_digits[length] = <char>(48 + number % 10)
        length += 1
        number //= 10
        if number == 0:
            break
    for i in range(length):
        digits[i] = reversed_digits[length - 1 - i]
    size[0] = length
    return digits


# ---------------------------------------------------------------------------------------------- engine

@cython.final
cdef class Engine:
    """Evaluates a compiled snapshot. Built once per snapshot; safe to share between requests."""

    cdef readonly tuple names  # flag names, in the payload's order
    cdef readonly dict index
    # Per flag, what a named lookup answers with: (enabled_named fragments, disabled_named, outcomes). The
    # compiled model itself is not kept once the tables are built (its arenas are the larger part of a
    # snapshot's memory): the tables point only at the objects `keep` holds.
    cdef tuple _named
    cdef readonly tuple slot_names  # slot -> context field or property name
    cdef tuple member_index  # slot -> {value: membership tests whose set holds it}
    cdef tuple _member_slots  # the slots with membership tests
    cdef Py_ssize_t n_members
    cdef list keep  # owns every object the tables point to
    cdef bytes _blob  # every fragment, end to end: the tables' Fragment.data point into it
    cdef Flag* _flags
    cdef Strategy* _strategies
    cdef uint32_t* _constraint_ids
    cdef Constraint* _constraints
    cdef VariantList* _lists
    cdef Variant* _variants
    cdef Override* _overrides
    cdef Dependency* _dependencies
    cdef Fragment* _fragments
    cdef Py_ssize_t n_flags
    # The other tables' lengths, for the image.
    cdef Py_ssize_t _n_strategies, _n_constraint_refs, _n_lists, _n_variants, _n_overrides, _n_dependencies
    cdef Py_ssize_t _n_fragments
    cdef int n_slots
    cdef Py_ssize_t n_constraints
    # Plans: the constraints whose answers make the key (those of enabled flags that _plan_constraint
    # admits), a byte per constraint that says whether it is one, and the plans by key.
    cdef bint planning
    cdef uint32_t* _plan_ids
    cdef Py_ssize_t n_plan_ids
    cdef uint8_t* _in_plan
    cdef dict _plans
    cdef set _plan_seen
    cdef Py_ssize_t _plan_bytes
    cdef public Py_ssize_t plan_bytes_limit  # PLAN_BYTES_LIMIT; tests lower it
    cdef Py_ssize_t plans_built
    cdef Py_ssize_t plan_hits

    implementation = "compiled"

    def __init__(self, flags):
        if self.keep is not None:
            raise RuntimeError("an Engine is built once")
        flags = tuple(flags)
        self.names = tuple(f.name for f in flags)
        self.index = {name: i for i, name in enumerate(self.names)}
        self._named = tuple((tuple(f.enabled_named), f.disabled_named, tuple(f.outcomes)) for f in flags)
        self.keep = []
        self._build(flags)

    def __dealloc__(self):
        free(self._flags)
        free(self._strategies)
        free(self._constraint_ids)
        free(self._constraints)
        free(self._lists)
        free(self._variants)
        free(self._overrides)
        free(self._dependencies)
        free(self._fragments)
        free(self._plan_ids)
        free(self._in_plan)

    # The image: the built tables as bytes, for the sync to build once and every worker to load ---------

    def __reduce__(self):
        """Pickles as its image: each table's bytes, with every pointer in them replaced by the object it
        points to (pickle keeps shared objects shared) or, for fragments, by an offset into the blob.
        Loading one allocates the tables and the objects the walk reads, and nothing else: no payload to
        parse, no model to build and free, so a worker's memory is what it keeps (flagproxy/image.py)."""
        cdef Py_ssize_t i, n_strategies, n_variants, n_dependencies, n_fragments
        cdef Fragment* offsets
        cdef const char* base = PyBytes_AS_STRING(self._blob)
        n_strategies = self._n_strategies
        n_variants = self._n_variants
        n_dependencies = self._n_dependencies
        n_fragments = self._n_fragments
        offsets = <Fragment*>_table(n_fragments, sizeof(Fragment))
        try:
            for i in range(n_fragments):
                offsets[i].data = <const char*>(self._fragments[i].data - base)
                offsets[i].size = self._fragments[i].size
            fragments = PyBytes_FromStringAndSize(<char*>offsets, n_fragments * sizeof(Fragment))
        finally:
            free(offsets)
        image = (
            _IMAGE_LAYOUT,
            self.names,
            self._named,
            self.slot_names,
            self.member_index,
            self.n_members,
            self._blob,
            PyBytes_FromStringAndSize(<char*>self._flags, self.n_flags * sizeof(Flag)),
            PyBytes_FromStringAndSize(<char*>self._strategies, n_strategies * sizeof(Strategy)),
            PyBytes_FromStringAndSize(<char*>self._constraint_ids, self._n_constraint_refs * sizeof(uint32_t)),
            PyBytes_FromStringAndSize(<char*>self._constraints, self.n_constraints * sizeof(Constraint)),
            PyBytes_FromStringAndSize(<char*>self._lists, self._n_lists * sizeof(VariantList)),
            PyBytes_FromStringAndSize(<char*>self._variants, n_variants * sizeof(Variant)),
            PyBytes_FromStringAndSize(<char*>self._overrides, self._n_overrides * sizeof(Override)),
            PyBytes_FromStringAndSize(<char*>self._dependencies, n_dependencies * sizeof(Dependency)),
            fragments,
            PyBytes_FromStringAndSize(<char*>self._plan_ids, self.n_plan_ids * sizeof(uint32_t)),
            PyBytes_FromStringAndSize(<char*>self._in_plan, self.n_constraints * sizeof(uint8_t)),
            self.planning,
            tuple(<object>self._constraints[i].values for i in range(self.n_constraints)),
            tuple(None if self._strategies[i].extra == NULL else <object>self._strategies[i].extra
                  for i in range(n_strategies)),
            tuple(<object>self._variants[i].name for i in range(n_variants)),
            tuple(None if self._dependencies[i].variants == NULL else <object>self._dependencies[i].variants
                  for i in range(n_dependencies)),
        )
        return (_engine_from_image, (image,))

    # Building the tables (once per snapshot) ---------------------------------------------------------

    cdef PyObject* _own(self, object value):
        self.keep.append(value)
        return <PyObject*>value

    cdef int _slot(self, dict slots, int field, object prop) except -1:
        """The slot of a context field: its code for a standard field, one per property name after those.
        `slots` holds the property names only: a property may have a standard field's name."""
        if field != FIELD_PROPERTY:
            return field
        return slots.setdefault(prop, STANDARD_SLOTS + len(slots))

    cdef int _build(self, tuple flags) except -1:
        cdef dict slots = {}  # property name -> slot
        cdef dict constraint_ids = {}  # _constraint_key -> index in self._constraints
        cdef list keys = []  # per constraint reference, in walk order
        cdef list unique = []
        cdef list fragments = []
        cdef set plan_ids = set()  # constraint ids
        cdef int64_t now = <int64_t>_time.time()
        cdef Py_ssize_t n_strategies = 0, n_lists = 0, n_variants = 0, n_overrides = 0, n_dependencies = 0
        cdef Py_ssize_t i
        cdef bytes blob

        for f in flags:
            variant_lists = [s.variants for s in f.strategies if s.variants is not None]
            if f.variants is not None:
                variant_lists.append(f.variants)
            for s in f.strategies:
                n_strategies += 1
                for c in s.constraints:
                    key = _constraint_key(c, self._slot(slots, c.field, c.prop))
                    if key not in constraint_ids:
                        constraint_ids[key] = len(unique)
                        unique.append(c)
                    keys.append(key)
                    if f.enabled and not f.broken and _plan_constraint(c, now):
                        plan_ids.add(constraint_ids[key])
            for vl in variant_lists:
                n_lists += 1
                n_variants += len(vl.variants)
                for v in vl.variants:
                    n_overrides += len(v.overrides)
            n_dependencies += len(f.dependencies)
            fragments.extend(f.enabled_list)
            fragments.append(f.disabled_all)

        self.n_flags = len(flags)
        self.n_constraints = len(unique)
        self._flags = <Flag*>_table(self.n_flags, sizeof(Flag))
        self._strategies = <Strategy*>_table(n_strategies, sizeof(Strategy))
        self._constraint_ids = <uint32_t*>_table(len(keys), sizeof(uint32_t))
        self._constraints = <Constraint*>_table(len(unique), sizeof(Constraint))
        self._lists = <VariantList*>_table(n_lists, sizeof(VariantList))
        self._variants = <Variant*>_table(n_variants, sizeof(Variant))
        self._overrides = <Override*>_table(n_overrides, sizeof(Override))
        self._dependencies = <Dependency*>_table(n_dependencies, sizeof(Dependency))
        self._fragments = <Fragment*>_table(len(fragments), sizeof(Fragment))
        self._n_strategies = n_strategies
        self._n_constraint_refs = len(keys)
        self._n_lists = n_lists
        self._n_variants = n_variants
        self._n_overrides = n_overrides
        self._n_dependencies = n_dependencies
        self._n_fragments = len(fragments)

        for i, c in enumerate(unique):
            self._fill_constraint(&self._constraints[i], c, self._slot(slots, c.field, c.prop))
        for i, key in enumerate(keys):
            self._constraint_ids[i] = constraint_ids[key]
        self._fill_plan_ids(sorted(plan_ids))

        # The blob starts with the main line: every flag's no-variant answer, in flag order, joined by
        # commas, as they stand in a body. A run of consecutive flags that are on without a variant is then
        # one slice of it, copied with one memcpy (see _add_part). The other answers follow.
        main_line = b",".join(f.enabled_list[0] for f in flags)
        blob = main_line + b"".join(fragment for f in flags for fragment in (*f.enabled_list[1:], f.disabled_all))
        self._own(blob)
        self._blob = blob
        cdef const char* main_at = PyBytes_AS_STRING(blob)
        cdef const char* rest_at = main_at + len(main_line)
        i = 0
        for f in flags:
            for k, fragment in enumerate((*f.enabled_list, f.disabled_all)):
                if k == 0:
                    self._fragments[i].data = main_at
                    main_at += len(fragment) + 1
                else:
                    self._fragments[i].data = rest_at
                    rest_at += len(fragment)
                self._fragments[i].size = len(fragment)
                i += 1

        # Strategies, lists, variants, dependencies and fragments are laid out in walk order, so a request
        # reads each table front to back.
        cdef _Cursor at = _Cursor()
        cdef dict members = {}  # slot -> {value: [membership test, ...]}
        for i, f in enumerate(flags):
            self._fill_flag(&self._flags[i], f, slots, at, members)
        self.n_slots = STANDARD_SLOTS + len(slots)
        self.slot_names = tuple(_STANDARD_FIELDS) + tuple(slots)
        self.n_members = at.members
        self.member_index = tuple(
            {value: tuple(tests) for value, tests in members.get(slot, {}).items()} for slot in range(self.n_slots)
        )
        self._member_slots = tuple(slot for slot in range(self.n_slots) if self.member_index[slot])
        return 0

    cdef int _fill_plan_ids(self, list plan_ids) except -1:
        self.n_plan_ids = len(plan_ids)
        self._plan_ids = <uint32_t*>_table(self.n_plan_ids, sizeof(uint32_t))
        self._in_plan = <uint8_t*>_table(self.n_constraints, sizeof(uint8_t))
        for i, index in enumerate(plan_ids):
            self._plan_ids[i] = index
            self._in_plan[<Py_ssize_t>index] = 1
        # Every request evaluates all of them: with more than there are flags they might cost more than
        # the walk they save.
        self.planning = self.n_plan_ids <= max(PLAN_CONSTRAINTS_FREE, self.n_flags)
        self.plan_bytes_limit = PLAN_BYTES_LIMIT
        self._plans = {}
        self._plan_seen = set()
        return 0

    cdef int32_t _member(self, _Cursor at, dict members, int slot, object values) except -1:
        """A new membership test: is the slot's value in `values`?"""
        cdef int32_t member = at.members
        at.members += 1
        by_value = members.setdefault(slot, {})
        for value in values:
            by_value.setdefault(value, []).append(member)
        return member

    cdef int _fill_flag(self, Flag* flag, object f, dict slots, _Cursor at, dict members) except -1:
        cdef Strategy* st
        cdef Dependency* dep
        flag.enabled = f.enabled
        flag.broken = f.broken
        flag.has_strategies = f.has_strategies
        flag.strategies = at.strategies
        flag.n_strategies = len(f.strategies)
        for s in f.strategies:
            st = &self._strategies[at.strategies]
            at.strategies += 1
            st.kind = s.kind
            st.constraints = at.constraint_refs
            st.n_constraints = len(s.constraints)
            at.constraint_refs += st.n_constraints
            st.percentage = min(s.percentage, 1000)  # gradualRolloutRandom has no upper limit; 100+ is on
            if s.stickiness == STICKY_DEFAULT:
                st.stickiness = STICK_DEFAULT
            elif s.stickiness == STICKY_RANDOM:
                st.stickiness = STICK_RANDOM
            else:
                st.stickiness = self._slot(slots, s.stickiness, s.stickiness_prop)
            st.constant = s.constant
            st.has_group = s.group is not None
            if s.group is not None:
                _prefix_init(&st.group, s.group, 0)
            if s.kind == STRATEGY_USER_WITH_ID:
                st.member = self._member(at, members, FIELD_USER_ID, s.ids)
            elif s.kind == STRATEGY_REMOTE_ADDRESS:
                st.extra = self._own(tuple(s.networks))
            elif s.kind == STRATEGY_CUSTOM:
                st.extra = self._own((s.custom, dict(s.parameters)))
            st.variants = -1
            if s.variants is not None:
                st.variants = self._fill_list(s.variants, slots, at, members)
        flag.variants = -1
        if f.variants is not None:
            flag.variants = self._fill_list(f.variants, slots, at, members)
        flag.dependencies = at.dependencies
        flag.n_dependencies = len(f.dependencies)
        for d in f.dependencies:
            dep = &self._dependencies[at.dependencies]
            at.dependencies += 1
            dep.parent = d.parent
            dep.enabled = d.enabled
            dep.variants = self._own(d.variants) if d.variants else NULL
        flag.fragments = at.fragments
        at.fragments += len(f.enabled_list)
        flag.disabled = at.fragments
        at.fragments += 1
        _prefix_init(&flag.rollout, f.name, 0)
        return 0

    cdef int _fill_constraint(self, Constraint* target, object c, int slot) except -1:
        target.slot = slot
        target.op = c.op
        target.cmp = c.cmp
        target.kind = c.kind
        target.inverted = c.inverted
        target.case_insensitive = c.case_insensitive
        target.empty = (c.op == OP_IN or c.op == OP_NOT_IN) and not c.values
        target.number = c.values if (c.op == OP_COMPARE and c.kind == KIND_NUMBER) else 0.0
        target.flip = c.flip
        target.values = self._own(c.values)
        return 0

    cdef int32_t _fill_list(self, object vl, dict slots, _Cursor at, dict members) except -1:
        cdef int32_t index = at.lists
        cdef VariantList* target = &self._lists[index]
        cdef Variant* variant
        cdef Override* override
        at.lists += 1
        target.variants = at.variants
        target.n_variants = len(vl.variants)
        target.total = vl.total
        if vl.stickiness == STICKY_DEFAULT:
            target.stickiness = STICK_DEFAULT
        else:
            target.stickiness = self._slot(slots, vl.stickiness, vl.stickiness_prop)
        target.has_overrides = any(v.overrides for v in vl.variants)
        _prefix_init(&target.group, vl.group, VARIANT_SEED)
        for v in vl.variants:
            variant = &self._variants[at.variants]
            at.variants += 1
            variant.weight = v.weight
            variant.outcome = v.outcome
            variant.name = self._own(v.name)
            variant.overrides = at.overrides
            variant.n_overrides = len(v.overrides)
            for field, prop, wanted in v.overrides:
                override = &self._overrides[at.overrides]
                at.overrides += 1
                override.slot = self._slot(slots, field, prop)
                override.member = self._member(at, members, override.slot, wanted)
        return index

    # Patching: a streamed change of a few flags (flagproxy/compiler/incremental.py) -------------------

    def patched(self, names, flags):
        """A new Engine that answers as one built whole from the flags `names` lists, in that order: each
        of `flags` (compiled model flags, their dependencies indexed in `names`) new or in place of the flag
        of its name, every other name kept from this engine, its dependencies pointed at where the parent
        now stands (-1 when it is gone). This engine is not changed. The new flags are built alone and their
        rows appended to copies of these tables (slots, constraints and membership tests numbered on from
        these), so it costs copying the tables, not compiling them: a replaced flag's rows stay, unread.
        The caller builds whole from time to time (compiler/incremental.py says when)."""
        cdef Engine part = Engine(flags)
        cdef Engine out = Engine.__new__(Engine)
        cdef Py_ssize_t i, j, n
        cdef int s
        cdef Py_ssize_t os_ = self._n_strategies, ocr = self._n_constraint_refs, oc = self.n_constraints
        cdef Py_ssize_t ol = self._n_lists, ov = self._n_variants, oo = self._n_overrides
        cdef Py_ssize_t od = self._n_dependencies, of = self._n_fragments, om = self.n_members
        cdef Py_ssize_t op = self.n_plan_ids
        cdef Flag* flag
        cdef Strategy* st
        cdef VariantList* vl
        cdef const char* old_base
        cdef const char* part_base
        cdef char* base
        names = tuple(names)
        n = len(names)
        out.keep = []
        # Slots: the part's property names found among these, or numbered on from them.
        slot_names = list(self.slot_names)
        slot_of = {name: k for k, name in enumerate(slot_names) if k >= STANDARD_SLOTS}
        slot_map = [k for k in range(STANDARD_SLOTS)]
        for k in range(STANDARD_SLOTS, part.n_slots):
            name = part.slot_names[k]
            found = slot_of.get(name)
            if found is None:
                found = slot_of[name] = len(slot_names)
                slot_names.append(name)
            slot_map.append(found)
        out.slot_names = tuple(slot_names)
        out.n_slots = len(slot_names)

        out._strategies = <Strategy*>_joined(self._strategies, os_, part._strategies, part._n_strategies, sizeof(Strategy))
        out._n_strategies = os_ + part._n_strategies
        out._constraint_ids = <uint32_t*>_joined(self._constraint_ids, ocr, part._constraint_ids, part._n_constraint_refs, sizeof(uint32_t))
        out._n_constraint_refs = ocr + part._n_constraint_refs
        out._constraints = <Constraint*>_joined(self._constraints, oc, part._constraints, part.n_constraints, sizeof(Constraint))
        out.n_constraints = oc + part.n_constraints
        out._lists = <VariantList*>_joined(self._lists, ol, part._lists, part._n_lists, sizeof(VariantList))
        out._n_lists = ol + part._n_lists
        out._variants = <Variant*>_joined(self._variants, ov, part._variants, part._n_variants, sizeof(Variant))
        out._n_variants = ov + part._n_variants
        out._overrides = <Override*>_joined(self._overrides, oo, part._overrides, part._n_overrides, sizeof(Override))
        out._n_overrides = oo + part._n_overrides
        out._dependencies = <Dependency*>_joined(self._dependencies, od, part._dependencies, part._n_dependencies, sizeof(Dependency))
        out._n_dependencies = od + part._n_dependencies
        out._fragments = <Fragment*>_joined(self._fragments, of, part._fragments, part._n_fragments, sizeof(Fragment))
        out._n_fragments = of + part._n_fragments
        out._plan_ids = <uint32_t*>_joined(self._plan_ids, op, part._plan_ids, part.n_plan_ids, sizeof(uint32_t))
        out.n_plan_ids = op + part.n_plan_ids
        out._in_plan = <uint8_t*>_joined(self._in_plan, oc, part._in_plan, part.n_constraints, sizeof(uint8_t))
        out._flags = <Flag*>_table(n, sizeof(Flag))
        out.n_flags = n

        # The part's rows, numbered on from these.
        for i in range(oc, out.n_constraints):
            out._constraints[i].slot = slot_map[out._constraints[i].slot]
        for i in range(ocr, out._n_constraint_refs):
            out._constraint_ids[i] += oc
        for i in range(op, out.n_plan_ids):
            out._plan_ids[i] += oc
        for i in range(os_, out._n_strategies):
            st = &out._strategies[i]
            st.constraints += ocr
            if st.stickiness >= 0:
                st.stickiness = slot_map[st.stickiness]
            if st.variants >= 0:
                st.variants += ol
            if st.kind == STRATEGY_USER_WITH_ID:
                st.member += om
        for i in range(ol, out._n_lists):
            vl = &out._lists[i]
            vl.variants += ov
            if vl.stickiness >= 0:
                vl.stickiness = slot_map[vl.stickiness]
        for i in range(ov, out._n_variants):
            out._variants[i].overrides += oo
        for i in range(oo, out._n_overrides):
            out._overrides[i].slot = slot_map[out._overrides[i].slot]
            out._overrides[i].member += om
        # One blob: these fragments' and the part's, so the image (__reduce__) stays one blob and offsets.
        blob = self._blob + part._blob
        old_base = PyBytes_AS_STRING(self._blob)
        part_base = PyBytes_AS_STRING(part._blob)
        base = PyBytes_AS_STRING(blob)
        for i in range(of):
            out._fragments[i].data = base + (out._fragments[i].data - old_base)
        for i in range(of, out._n_fragments):
            out._fragments[i].data = base + PyBytes_GET_SIZE(self._blob) + (out._fragments[i].data - part_base)
        out._blob = blob
        # What the tables point to: this engine's and the part's objects, blobs aside (the lists are held,
        # not copied: a patch of a patch nests them).
        out.keep = [kept for kept in self.keep if kept is not self._blob]
        out.keep.append([kept for kept in part.keep if kept is not part._blob])

        if names == self.names:  # the same flags in the same places: the given ones replace theirs
            memcpy(out._flags, self._flags, n * sizeof(Flag))
            named = list(self._named)
            index = self.index
        else:
            named = [None] * n
            index = {}
            for i in range(n):
                index[names[i]] = i
            # This engine's dependencies follow their parent's name to its new place (-1: it is gone).
            moved = [-1] * self.n_flags
            for name, k in self.index.items():
                moved[k] = index.get(name, -1)
            for i in range(od):
                if out._dependencies[i].parent >= 0:
                    out._dependencies[i].parent = moved[out._dependencies[i].parent]
            for i in range(n):
                found = self.index.get(names[i])
                if found is not None:
                    j = found
                    out._flags[i] = self._flags[j]
                    named[i] = self._named[j]
        # The given flags, from the part.
        for j in range(part.n_flags):
            found = index.get(part.names[j])
            if found is None:
                raise ValueError(f"flag {part.names[j]!r} is given but not listed")
            i = found
            flag = &out._flags[i]
            flag[0] = part._flags[j]
            flag.strategies += os_
            if flag.variants >= 0:
                flag.variants += ol
            flag.dependencies += od
            flag.fragments += of
            flag.disabled += of
            named[i] = part._named[j]
        if None in named:
            raise ValueError(f"flag {names[named.index(None)]!r} is neither kept nor given")
        out.names = names
        out.index = index
        out._named = tuple(named)

        # Membership tests: the part's numbered on from these, merged into the same per-slot indexes.
        member_index = list(self.member_index) + [{} for _ in range(out.n_slots - self.n_slots)]
        for k in range(part.n_slots):
            tests = part.member_index[k]
            if not tests:
                continue
            s = slot_map[k]
            merged = dict(member_index[s])
            for value, listed in (<dict>tests).items():
                merged[value] = merged.get(value, ()) + tuple(t + om for t in listed)
            member_index[s] = merged
        out.member_index = tuple(member_index)
        out._member_slots = tuple(k for k in range(out.n_slots) if out.member_index[k])
        out.n_members = om + part.n_members

        out.planning = out.n_plan_ids <= max(PLAN_CONSTRAINTS_FREE, out.n_flags)
        out.plan_bytes_limit = self.plan_bytes_limit
        out._plans = {}
        out._plan_seen = set()
        return out

    # The walk (per request) --------------------------------------------------------------------------

    cdef _Evaluation _start(self, object context):
        cdef _Evaluation ev = _Evaluation.__new__(_Evaluation)
        ev.start(self, context)
        return ev

    cdef inline bint _condition_holds(self, const Strategy* s, const HashPrefix* toggle, _Evaluation ev) except -1:
        """The strategy's own condition (its constraints hold). The common kinds are decided here, inlined
        into the walk; the rest in _rare_condition_holds."""
        cdef int kind = s.kind
        cdef const char* data
        cdef Py_ssize_t size
        cdef char digits[8]
        cdef uint32_t bucket
        cdef const SplitIdentifier* split
        if kind == STRATEGY_DEFAULT:
            return True
        if kind == STRATEGY_CONSTANT:  # among them, full and zero rollouts (decided at build time)
            return s.constant
        if kind == STRATEGY_FLEXIBLE_ROLLOUT:
            if s.stickiness == STICK_DEFAULT:
                split = ev.default_split()
                if split != NULL:
                    bucket = _split_hash(&s.group if s.has_group else toggle, split) % ROLLOUT_MODULUS + 1
                    return bucket <= <uint32_t>s.percentage
                data = ev.seed(FIELD_USER_ID, &size)
                if data == NULL:
                    data = ev.seed(FIELD_SESSION_ID, &size)
                if data == NULL:
                    data = _random_seed(ev, digits, &size)
            elif s.stickiness == STICK_RANDOM:
                data = _random_seed(ev, digits, &size)
            else:
                data = ev.seed(s.stickiness, &size)
                if data == NULL:
                    return False
            bucket = _rollout_bucket(&s.group if s.has_group else toggle, <const uint8_t*>data, size)
            return bucket <= <uint32_t>s.percentage
        return self._rare_condition_holds(s, ev)

    cdef bint _rare_condition_holds(self, const Strategy* s, _Evaluation ev) except -1:
        cdef int kind = s.kind
        cdef PyObject* seed
        cdef const char* data
        cdef Py_ssize_t size
        cdef object address
        if kind == STRATEGY_USER_WITH_ID:
            return ev.is_member(FIELD_USER_ID, s.member)
        if kind == STRATEGY_GRADUAL_USER_ID or kind == STRATEGY_GRADUAL_SESSION_ID:
            data = ev.seed(FIELD_USER_ID if kind == STRATEGY_GRADUAL_USER_ID else FIELD_SESSION_ID, &size)
            if data == NULL:
                return False
            return _rollout_bucket(&s.group, <const uint8_t*>data, size) <= <uint32_t>s.percentage
        if kind == STRATEGY_GRADUAL_RANDOM:
            # Yggdrasil draws from 1..99, so 100 is always on and 0 never.
            return <int>ev.random(99) < s.percentage
        if kind == STRATEGY_REMOTE_ADDRESS:
            seed = ev.value(FIELD_REMOTE_ADDRESS)
            if seed == NULL:
                return False
            address = ev.parsed_value(FIELD_REMOTE_ADDRESS, PARSED_ADDRESS, seed)
            return address is not None and _values.networks_contain(<object>s.extra, address)
        if kind == STRATEGY_CUSTOM:
            ev.never = True  # a custom strategy may use anything; never cache its answers
            custom, parameters = <tuple><object>s.extra
            try:
                return bool(custom.is_enabled(parameters, ev.as_dict()))
            except Exception:  # a user's strategy failing is that strategy being off
                return False
        return False

    cdef inline bint _constraints_hold(self, const Strategy* s, _Evaluation ev) except -1:
        cdef const uint32_t* ids = &self._constraint_ids[s.constraints]
        cdef int32_t j
        for j in range(s.n_constraints):
            if not ev.holds(ids[j]):
                return False
        return True

    cdef inline int32_t _first_match(self, const Flag* flag, const HashPrefix* toggle, _Evaluation ev) except -2:
        """The index of the first strategy whose constraints and condition hold, or -1."""
        cdef int32_t i
        cdef const Strategy* s
        for i in range(flag.strategies, flag.strategies + flag.n_strategies):
            s = &self._strategies[i]
            if self._constraints_hold(s, ev) and self._condition_holds(s, toggle, ev):
                return i
        return -1

    cdef int32_t _pick_variant(self, int32_t list_index, _Evaluation ev) except -2:
        """The index of the chosen variant, or -1 for none."""
        cdef const VariantList* vl
        cdef const Variant* variant
        cdef const Override* override
        cdef const char* data
        cdef Py_ssize_t size
        cdef int32_t i, j
        cdef uint32_t target
        cdef const SplitIdentifier* split
        if list_index < 0:
            return -1
        vl = &self._lists[list_index]
        if vl.has_overrides:
            for i in range(vl.variants, vl.variants + vl.n_variants):
                variant = &self._variants[i]
                for j in range(variant.overrides, variant.overrides + variant.n_overrides):
                    override = &self._overrides[j]
                    if ev.is_member(override.slot, override.member):
                        return i
        if vl.total == 0:
            return -1
        if vl.stickiness == STICK_DEFAULT:
            split = ev.default_split()
            if split != NULL:
                target = _split_hash(&vl.group, split) % vl.total + 1
                return self._variant_at(vl, target)
            data = ev.seed(FIELD_USER_ID, &size)
            if data == NULL:
                data = ev.seed(FIELD_SESSION_ID, &size)
        elif vl.stickiness == FIELD_CURRENT_TIME and ev.value(FIELD_CURRENT_TIME) == NULL:
            data = NULL  # seeds read the context as it is: no stand-in for a missing currentTime
        else:
            data = ev.seed(vl.stickiness, &size)
        if data == NULL:
            target = ev.random(vl.total)
        else:
            target = _bucket(&vl.group, <const uint8_t*>data, size, vl.total)
        return self._variant_at(vl, target)

    cdef inline int32_t _variant_at(self, const VariantList* vl, uint32_t target) noexcept:
        """The variant whose weight range holds `target` (1..total), or -1."""
        cdef uint32_t cumulative = 0
        cdef int32_t i
        for i in range(vl.variants, vl.variants + vl.n_variants):
            cumulative += self._variants[i].weight
            if cumulative >= target:
                return i
        return -1

    cdef inline int32_t _variant_list(self, const Flag* flag, int32_t matched) noexcept:
        if matched >= 0 and self._strategies[matched].variants >= 0:
            return self._strategies[matched].variants
        return flag.variants

    cdef bint _dependency_holds(self, const Dependency* dep, const Flag* child, _Evaluation ev) except -1:
        cdef const Flag* parent
        cdef int32_t matched = -1, variant
        cdef bint parent_on
        if dep.parent < 0:
            return False
        parent = &self._flags[dep.parent]
        if parent.n_dependencies > 0:
            return False  # no transitive dependencies (and so no cycles)
        # The parent is evaluated with the child's context and the child's name as default rollout group.
        if not parent.broken:
            matched = self._first_match(parent, &child.rollout, ev)
        parent_on = parent.enabled and not parent.broken and (matched >= 0 or not parent.has_strategies)
        if dep.variants != NULL:
            variant = self._pick_variant(self._variant_list(parent, matched), ev)
            if variant >= 0 and not _set_contains(dep.variants, self._variants[variant].name):
                return False
        return parent_on == dep.enabled

    cdef inline int32_t _outcome(self, const Flag* flag, _Evaluation ev) except -2:
        """-1 when the flag is off for this context, else the index of its enabled fragment."""
        cdef int32_t i
        if not flag.enabled or flag.broken:
            return -1
        for i in range(flag.dependencies, flag.dependencies + flag.n_dependencies):
            if not self._dependency_holds(&self._dependencies[i], flag, ev):
                return -1
        return self._answer(flag, self._first_match(flag, &flag.rollout, ev), ev)

    cdef inline int32_t _answer(self, const Flag* flag, int32_t matched, _Evaluation ev) except -2:
        """_outcome's answer once the matched strategy (or -1) is known."""
        cdef int32_t list_index, variant
        if matched < 0 and flag.has_strategies:
            return -1
        list_index = self._variant_list(flag, matched)
        if list_index < 0:
            return 0  # no variants: not worth _pick_variant's call
        variant = self._pick_variant(list_index, ev)
        return 0 if variant < 0 else self._variants[variant].outcome

    # Python-object API (tests, SDK-style use) --------------------------------------------------------

    def is_enabled(self, name, context):
        i = self.index.get(name)
        return i is not None and self._outcome(&self._flags[<Py_ssize_t>i], self._start(context)) >= 0

    def get_variant(self, name, context):
        i = self.index.get(name)
        cdef int32_t found = -1
        if i is not None:
            found = self._outcome(&self._flags[<Py_ssize_t>i], self._start(context))
        if found < 0:
            return {"name": "disabled", "enabled": False, "feature_enabled": False}
        if found == 0:
            return {"name": "disabled", "enabled": False, "feature_enabled": True}
        variant_name, payload, _ = (<tuple>(<tuple>self._named[i])[2])[found]
        result = {"name": variant_name, "enabled": True, "feature_enabled": True}
        if payload is not None:
            result["payload"] = payload
        return result

    # Response bodies (the proxy's hot path) ----------------------------------------------------------

    def evaluate_all_body(self, context, bint include_disabled=False):
        """(body, valid_in): the toggles of GET /proxy (or /proxy/all), and how long that answer holds."""
        cdef _Evaluation ev = self._start(context)
        cdef _Plan plan = None
        cdef bytes key
        if self.planning:
            key = self._plan_key(ev, include_disabled)
            plan = self._plans.get(key)
            if plan is None:
                plan = self._admit_plan(key, ev, include_disabled)
            else:
                self.plan_hits += 1
        return self._assemble(ev, plan, include_disabled), ev.valid_in()

    cdef bytes _assemble(self, _Evaluation ev, _Plan plan, bint include_disabled):
        """The body: with a plan, only the flags it left undecided are walked; without one, every flag."""
        cdef Py_ssize_t n = plan.n_steps if plan is not None else self.n_flags
        cdef Fragment* parts = <Fragment*>malloc((n if n > 0 else 1) * sizeof(Fragment))
        cdef Py_ssize_t count = 0, i, walked = 0
        cdef int32_t step, found, variant
        cdef uint32_t target, cumulative
        cdef const Flag* flag
        cdef const Walk* walk
        cdef const Quick* quick
        cdef const VariantList* vl
        cdef const SplitIdentifier* split = NULL
        cdef int split_known = 0  # 1: `split` is this request's default_split() (made at the first use)
        if parts == NULL:
            raise MemoryError()
        try:
            for i in range(n):
                if plan is None:
                    step = <int32_t>i
                    flag = &self._flags[step]
                    found = self._outcome(flag, ev)
                else:
                    step = plan.steps[i]
                    if step < 0:
                        count = _add_part(parts, count, &plan.parts[-step - 1])
                        continue
                    walk = &plan.walks[walked]
                    walked += 1
                    if walk.quick >= 0:
                        # What _planned_outcome answers for it, from its record alone (no hash needed when
                        # it always holds; without a split identifier, the full walk below).
                        quick = &plan.quick[walk.quick]
                        if not quick.always and not split_known:
                            split = ev.default_split()
                            split_known = 1
                        if quick.always or split != NULL:
                            if quick.always or _split_hash(&quick.prefix, split) % ROLLOUT_MODULUS + 1 <= quick.percentage:
                                found = 0
                                if quick.list >= 0:
                                    if quick.hashed_variants and not split_known:
                                        split = ev.default_split()
                                        split_known = 1
                                    if quick.hashed_variants and split != NULL:
                                        # _pick_variant's default-stickiness pick, without its call and checks
                                        vl = &self._lists[quick.list]
                                        target = _split_hash(&vl.group, split) % vl.total + 1
                                        cumulative = 0
                                        for variant in range(vl.variants, vl.variants + vl.n_variants):
                                            cumulative += self._variants[variant].weight
                                            if cumulative >= target:
                                                found = self._variants[variant].outcome
                                                break
                                    else:
                                        variant = self._pick_variant(quick.list, ev)
                                        found = 0 if variant < 0 else self._variants[variant].outcome
                                count = _add_part(parts, count, &self._fragments[quick.fragments + found])
                            elif include_disabled:
                                count = _add_part(parts, count, &self._fragments[quick.disabled])
                            continue
                    flag = &self._flags[step]
                    if walk.n < 0:
                        found = self._outcome(flag, ev)
                    else:
                        found = self._planned_outcome(flag, &plan.candidates[walk.candidates], walk.n, ev)
                if found >= 0:
                    count = _add_part(parts, count, &self._fragments[flag.fragments + found])
                elif include_disabled:
                    count = _add_part(parts, count, &self._fragments[flag.disabled])
            return self._join(parts, count)
        finally:
            free(parts)

    # Plans: the flags a context's plan constraints decide, shared by contexts with the same answers ----

    cdef bytes _plan_key(self, _Evaluation ev, bint include_disabled):
        """include_disabled, then the answer of every plan constraint for this context, a bit each.
        Evaluating them all up front costs little: the walk would ask for nearly all of them anyway, and
        each is decided once per request (the memo), so the walk then finds them answered."""
        cdef Py_ssize_t i, n = self.n_plan_ids, size = 1 + (n + len(self._member_slots) + 7) // 8
        cdef bytes key = PyBytes_FromStringAndSize(NULL, size)
        cdef uint8_t* bits = <uint8_t*>PyBytes_AS_STRING(key)
        memset(bits, 0, size)
        bits[0] = include_disabled
        for i in range(n):
            if ev.holds(self._plan_ids[i]):
                bits[1 + (i >> 3)] |= <uint8_t>(1 << (i & 7))
        for slot in self._member_slots:  # then whether each of these fields' value is listed anywhere
            if ev.listed(<int>slot):
                bits[1 + (n >> 3)] |= <uint8_t>(1 << (n & 7))
            n += 1
        return key

    cdef _Plan _admit_plan(self, bytes key, _Evaluation ev, bint include_disabled):
        """The plan of `key` from the second time the key is seen on (a key seen once may never come back:
        building its plan would cost a walk for nothing), else None."""
        cdef _Plan plan
        if key not in self._plan_seen:
            if len(self._plan_seen) >= PLAN_SEEN_LIMIT:
                self._plan_seen.clear()
            self._plan_seen.add(key)
            return None
        self._plan_seen.discard(key)
        plan = self._build_plan(ev, include_disabled)
        plan.size += PyBytes_GET_SIZE(key)
        self.plans_built += 1
        if plan.size > self.plan_bytes_limit:
            return plan  # used once, kept by nobody
        while self._plan_bytes + plan.size > self.plan_bytes_limit:  # the oldest go first
            self._plan_bytes -= (<_Plan>self._plans.pop(next(iter(self._plans)))).size
        self._plans[key] = plan
        self._plan_bytes += plan.size
        return plan

    cdef _Plan _build_plan(self, _Evaluation ev, bint include_disabled):
        """Steps in flag order: the flags the plan constraints' answers decide become fixed parts of the
        body (runs of them on the main line merged into one part), the rest stay flags to walk."""
        cdef _Plan plan = _Plan.__new__(_Plan)
        cdef Py_ssize_t n = self.n_flags, i, steps = 0, parts = 0, candidates = 0
        cdef int32_t found
        cdef const Flag* flag
        cdef const Fragment* fragment
        cdef Walk* walk
        plan.steps = <int32_t*>_table(n, sizeof(int32_t))  # at most one step a flag
        plan.parts = <Fragment*>_table(n, sizeof(Fragment))
        plan.walks = <Walk*>_table(n, sizeof(Walk))
        plan.quick = <Quick*>_table(n, sizeof(Quick))
        plan.candidates = <int32_t*>_table(self._n_strategies, sizeof(int32_t))  # at most each strategy once
        for i in range(n):
            flag = &self._flags[i]
            found = self._decided_outcome(flag, ev)
            if found == UNDECIDED:
                plan.steps[steps] = <int32_t>i
                steps += 1
                walk = &plan.walks[plan.walked]
                plan.walked += 1
                walk.quick = -1
                if flag.n_dependencies:
                    walk.n = -1
                else:
                    walk.candidates = <int32_t>candidates
                    walk.n = self._plan_candidates(flag, ev, &plan.candidates[candidates])
                    if walk.n == 1 and self._quick_record(flag, plan.candidates[candidates], &plan.quick[plan.n_quick]):
                        walk.quick = <int32_t>plan.n_quick
                        plan.n_quick += 1
                    candidates += walk.n
                continue
            if found >= 0:
                fragment = &self._fragments[flag.fragments + found]
            elif include_disabled:
                fragment = &self._fragments[flag.disabled]
            else:
                continue
            if steps and plan.steps[steps - 1] < 0:
                if _add_part(plan.parts, parts, fragment) == parts:
                    continue  # it extended the last part
            else:
                plan.parts[parts] = fragment[0]
            plan.steps[steps] = -<int32_t>(parts + 1)
            steps += 1
            parts += 1
        plan.n_steps = steps
        plan.steps = <int32_t*>_shrink(plan.steps, steps * sizeof(int32_t))
        plan.parts = <Fragment*>_shrink(plan.parts, parts * sizeof(Fragment))
        plan.walks = <Walk*>_shrink(plan.walks, plan.walked * sizeof(Walk))
        plan.quick = <Quick*>_shrink(plan.quick, plan.n_quick * sizeof(Quick))
        plan.candidates = <int32_t*>_shrink(plan.candidates, candidates * sizeof(int32_t))
        plan.size = (steps * sizeof(int32_t) + parts * sizeof(Fragment) + plan.walked * sizeof(Walk)
                     + plan.n_quick * sizeof(Quick)
                     + candidates * sizeof(int32_t) + PLAN_OVERHEAD)
        return plan

    cdef int32_t _decided_outcome(self, const Flag* flag, _Evaluation ev) except -3:
        """What _outcome would answer when the plan key decides it (the plan constraints' answers are in
        ev's memo), else UNDECIDED: anything else the walk would read first (another constraint, a
        rollout's hash, a listed user id, the clock, randomness) leaves the flag to be walked per request."""
        cdef int32_t i, matched
        if not flag.enabled or flag.broken:
            return -1
        for i in range(flag.dependencies, flag.dependencies + flag.n_dependencies):
            matched = self._decided_dependency(&self._dependencies[i], ev)
            if matched != 1:
                return matched  # UNDECIDED, or -1: off
        matched = self._decided_match(flag, ev)
        if matched == UNDECIDED:
            return UNDECIDED
        if matched < 0 and flag.has_strategies:
            return -1
        return 0 if self._no_variant(self._variant_list(flag, matched), ev) else UNDECIDED

    cdef int32_t _decided_match(self, const Flag* flag, _Evaluation ev) except -3:
        """_first_match's answer when the plan key decides it, else UNDECIDED."""
        cdef int32_t i, j
        cdef const Strategy* s
        cdef const uint32_t* ids
        cdef bint ok
        for i in range(flag.strategies, flag.strategies + flag.n_strategies):
            s = &self._strategies[i]
            ids = &self._constraint_ids[s.constraints]
            ok = True
            for j in range(s.n_constraints):
                if not self._in_plan[ids[j]]:
                    return UNDECIDED  # the walk reads it here, whatever the constraints after it say
                if ev.memo[ids[j]] != 2:
                    ok = False
                    break
            if not ok:
                continue
            if s.kind == STRATEGY_DEFAULT or (s.kind == STRATEGY_CONSTANT and s.constant):
                return i
            if s.kind == STRATEGY_CONSTANT:
                continue
            if s.kind == STRATEGY_USER_WITH_ID and not ev.listed(FIELD_USER_ID):
                continue  # a user id no list holds
            return UNDECIDED
        return -1

    cdef int32_t _plan_candidates(self, const Flag* flag, _Evaluation ev, int32_t* out) except -1:
        """The strategies of a flag left to walk (no dependencies) that the plan constraints' answers do
        not rule out, in order, written to `out`; returns how many. A strategy is ruled out when the walk
        would find a plan constraint false before reading anything else (so skipping it reads and
        records nothing the walk would have: no clock, no other field), or when it cannot hold whatever
        the identifier (a constant off, a userWithId list when the context's userId is listed nowhere).
        A candidate whose constraints are all plan constraints that hold is written as -1 - its index
        (the walk skips its constraints); after one that then surely holds (default, constant on) none
        follow."""
        cdef int32_t i, j, n = 0
        cdef const Strategy* s
        cdef const uint32_t* ids
        cdef int known  # 1: every constraint a plan one that holds, 0: one the walk must read, -1: ruled out
        for i in range(flag.strategies, flag.strategies + flag.n_strategies):
            s = &self._strategies[i]
            ids = &self._constraint_ids[s.constraints]
            known = 1
            for j in range(s.n_constraints):
                if not self._in_plan[ids[j]]:
                    known = 0
                    break
                if ev.memo[ids[j]] != 2:
                    known = -1
                    break
            if known < 0:
                continue
            if known and s.kind == STRATEGY_CONSTANT and not s.constant:
                continue
            if known and s.kind == STRATEGY_USER_WITH_ID and not ev.listed(FIELD_USER_ID):
                continue
            out[n] = -1 - i if known else i
            n += 1
            if known and (s.kind == STRATEGY_DEFAULT or s.kind == STRATEGY_CONSTANT):
                break  # it holds: the walk stops here
        return n

    cdef bint _quick_record(self, const Flag* flag, int32_t code, Quick* out) noexcept:
        """Whether the flag's one candidate `code` (see _plan_candidates) makes a Quick record, written to
        `out`: its constraints all plan constraints that hold (code < 0), and either a flexibleRollout of
        default stickiness (the walk hashes the request's split identifier, as _condition_holds does) or
        a strategy that surely holds (a default, a constant on: only the variant is left to pick). A list
        picked by the default stickiness's hash alone (no overrides, some weight) is marked so: the walk
        picks from it inline, as _pick_variant does; any other list is left to _pick_variant."""
        cdef const Strategy* s
        cdef const VariantList* vl
        cdef int32_t i
        if code >= 0 or not flag.has_strategies:
            return False
        i = -1 - code
        s = &self._strategies[i]
        memset(out, 0, sizeof(Quick))
        if s.kind == STRATEGY_DEFAULT or (s.kind == STRATEGY_CONSTANT and s.constant):
            out.always = 1
        elif s.kind == STRATEGY_FLEXIBLE_ROLLOUT and s.stickiness == STICK_DEFAULT and 0 <= s.percentage <= 100:
            out.prefix = s.group if s.has_group else flag.rollout
            out.percentage = <uint8_t>s.percentage
        else:
            return False
        out.list = self._variant_list(flag, i)
        if out.list >= 0:
            vl = &self._lists[out.list]
            out.hashed_variants = vl.stickiness == STICK_DEFAULT and not vl.has_overrides and vl.total != 0
        out.fragments = flag.fragments
        out.disabled = flag.disabled
        return True

    cdef inline int32_t _planned_outcome(
        self, const Flag* flag, const int32_t* candidates, int32_t n, _Evaluation ev
    ) except -2:
        """_outcome of an enabled flag without dependencies, over the strategies its plan left."""
        cdef int32_t c, code, i
        cdef const Strategy* s
        for c in range(n):
            code = candidates[c]
            i = -1 - code if code < 0 else code
            s = &self._strategies[i]
            if (code < 0 or self._constraints_hold(s, ev)) and self._condition_holds(s, &flag.rollout, ev):
                return self._answer(flag, i, ev)
        return self._answer(flag, -1, ev)

    cdef bint _no_variant(self, int32_t list_index, _Evaluation ev) except -1:
        """Whether _pick_variant surely picks none: no list, or a list of zero weight whose overrides
        cannot match (no override's field has a value any override lists)."""
        cdef const VariantList* vl
        cdef int32_t i, j
        if list_index < 0:
            return True
        vl = &self._lists[list_index]
        if vl.total != 0:
            return False  # a hash or randomness picks one
        if vl.has_overrides:
            for i in range(vl.variants, vl.variants + vl.n_variants):
                for j in range(self._variants[i].overrides, self._variants[i].overrides + self._variants[i].n_overrides):
                    if ev.listed(self._overrides[j].slot):
                        return False
        return True

    cdef int32_t _decided_dependency(self, const Dependency* dep, _Evaluation ev) except -3:
        """_dependency_holds's answer (1 or -1) when the plan key decides it, else UNDECIDED."""
        cdef const Flag* parent
        cdef int32_t matched = -1
        cdef bint parent_on
        if dep.parent < 0:
            return -1
        parent = &self._flags[dep.parent]
        if parent.n_dependencies > 0:
            return -1
        if not parent.broken:
            matched = self._decided_match(parent, ev)
            if matched == UNDECIDED:
                return UNDECIDED
        parent_on = parent.enabled and not parent.broken and (matched >= 0 or not parent.has_strategies)
        if dep.variants != NULL and not self._no_variant(self._variant_list(parent, matched), ev):
            return UNDECIDED
        return 1 if parent_on == dep.enabled else -1

    def plan_stats(self):
        """For tests and benchmarks: whether this snapshot plans, and how its plans were used."""
        return {
            "planning": bool(self.planning),
            "plan_constraints": self.n_plan_ids,
            "plans": len(self._plans),
            "bytes": self._plan_bytes,
            "built": self.plans_built,
            "hits": self.plan_hits,
            "walked": [(<_Plan>plan).walked for plan in self._plans.values()],
            "quick": [(<_Plan>plan).n_quick for plan in self._plans.values()],
        }

    def evaluate_named_body(self, context, names):
        """(body, valid_in, outcomes) for POST /proxy: one toggle per requested name, in order."""
        cdef _Evaluation ev = self._start(context)
        cdef list fragments = []
        cdef list outcomes = []
        cdef int32_t found
        for name in names:
            i = self.index.get(name)
            if i is None:
                fragments.append(_unknown_named(name))
                outcomes.append((name, False, "disabled"))
                continue
            named = <tuple>self._named[i]
            found = self._outcome(&self._flags[<Py_ssize_t>i], ev)
            if found >= 0:
                fragments.append((<tuple>named[0])[found])
                outcomes.append((name, True, (<tuple>(<tuple>named[2])[found])[0]))
            else:
                fragments.append(named[1])
                outcomes.append((name, False, "disabled"))
        return _BODY_PREFIX + b",".join(fragments) + _BODY_SUFFIX, ev.valid_in(), outcomes

    cdef bytes _join(self, const Fragment* parts, Py_ssize_t count):
        """b'{"toggles":[' + b','.join(parts) + b']}' in one allocation."""
        cdef bytes prefix = _BODY_PREFIX
        cdef bytes suffix = _BODY_SUFFIX
        cdef Py_ssize_t i
        cdef Py_ssize_t total = PyBytes_GET_SIZE(prefix) + PyBytes_GET_SIZE(suffix) + (count - 1 if count > 1 else 0)
        for i in range(count):
            total += parts[i].size
        cdef bytes body = PyBytes_FromStringAndSize(NULL, total)
        cdef char* out = PyBytes_AS_STRING(body)
        memcpy(out, PyBytes_AS_STRING(prefix), PyBytes_GET_SIZE(prefix))
        out += PyBytes_GET_SIZE(prefix)
        for i in range(count):
            if i:
                out[0] = b","
                out += 1
            memcpy(out, parts[i].data, parts[i].size)
            out += parts[i].size
        memcpy(out, PyBytes_AS_STRING(suffix), PyBytes_GET_SIZE(suffix))
        return body


# The image (Engine.__reduce__) ---------------------------------------------------------------------------

# What an image's tables were laid out by: an image made by another build of this module is refused, and
# its loader falls back to compiling the document (flagproxy/image.py).
_IMAGE_LAYOUT = (
    1,
    sizeof(Flag),
    sizeof(Strategy),
    sizeof(Constraint),
    sizeof(VariantList),
    sizeof(Variant),
    sizeof(Override),
    sizeof(Dependency),
    sizeof(Fragment),
)


cdef void* _table_from(bytes data, size_t size, Py_ssize_t* count) except NULL:
    """A new table holding `data`, which must be whole `size`-byte rows; their number goes to `count`."""
    cdef Py_ssize_t length = PyBytes_GET_SIZE(data)
    if length % size:
        raise ValueError("a snapshot image with a broken table")
    count[0] = length // size
    cdef void* table = _table(count[0], size)
    memcpy(table, PyBytes_AS_STRING(data), length)
    return table


def _engine_from_image(tuple image):
    """The Engine an image (Engine.__reduce__) was made of, with its own tables and no plans yet."""
    cdef Engine engine = Engine.__new__(Engine)
    cdef Py_ssize_t i, count
    cdef const char* base
    (layout, names, named, slot_names, member_index, n_members, blob, flags, strategies, constraint_ids,
     constraints, lists, variants, overrides, dependencies, fragments, plan_ids, in_plan, planning,
     constraint_values, strategy_extras, variant_names, dependency_variants) = image
    if layout != _IMAGE_LAYOUT:
        raise ValueError("a snapshot image of another build")
    engine.names = names
    engine.index = {name: i for i, name in enumerate(names)}
    engine._named = named
    engine.slot_names = slot_names
    engine.n_slots = len(slot_names)
    engine.member_index = member_index
    engine._member_slots = tuple(slot for slot in range(engine.n_slots) if member_index[slot])
    engine.n_members = n_members
    # The tuples own what the tables point to, as `keep` does for a built engine.
    engine.keep = [blob, constraint_values, strategy_extras, variant_names, dependency_variants]
    engine._blob = blob
    engine._flags = <Flag*>_table_from(flags, sizeof(Flag), &engine.n_flags)
    engine._strategies = <Strategy*>_table_from(strategies, sizeof(Strategy), &engine._n_strategies)
    engine._constraint_ids = <uint32_t*>_table_from(constraint_ids, sizeof(uint32_t), &engine._n_constraint_refs)
    engine._constraints = <Constraint*>_table_from(constraints, sizeof(Constraint), &engine.n_constraints)
    engine._lists = <VariantList*>_table_from(lists, sizeof(VariantList), &engine._n_lists)
    engine._variants = <Variant*>_table_from(variants, sizeof(Variant), &engine._n_variants)
    engine._overrides = <Override*>_table_from(overrides, sizeof(Override), &engine._n_overrides)
    engine._dependencies = <Dependency*>_table_from(dependencies, sizeof(Dependency), &engine._n_dependencies)
    engine._fragments = <Fragment*>_table_from(fragments, sizeof(Fragment), &engine._n_fragments)
    engine._plan_ids = <uint32_t*>_table_from(plan_ids, sizeof(uint32_t), &engine.n_plan_ids)
    engine._in_plan = <uint8_t*>_table_from(in_plan, sizeof(uint8_t), &count)
    if (len(names) != engine.n_flags or len(named) != engine.n_flags or count != engine.n_constraints
            or len(constraint_values) != engine.n_constraints or len(strategy_extras) != engine._n_strategies
            or len(variant_names) != engine._n_variants or len(dependency_variants) != engine._n_dependencies):
        raise ValueError("a snapshot image whose parts disagree")
    for i in range(engine.n_constraints):
        engine._constraints[i].values = <PyObject*>constraint_values[i]
    for i in range(engine._n_strategies):
        extra = strategy_extras[i]
        engine._strategies[i].extra = NULL if extra is None else <PyObject*>extra
    for i in range(engine._n_variants):
        engine._variants[i].name = <PyObject*>variant_names[i]
    for i in range(engine._n_dependencies):
        wanted = dependency_variants[i]
        engine._dependencies[i].variants = NULL if wanted is None else <PyObject*>wanted
    base = PyBytes_AS_STRING(blob)
    for i in range(engine._n_fragments):
        if <Py_ssize_t>engine._fragments[i].data + engine._fragments[i].size > PyBytes_GET_SIZE(blob):
            raise ValueError("a snapshot image with a fragment outside its blob")
        engine._fragments[i].data = base + <Py_ssize_t>engine._fragments[i].data
    engine.planning = planning
    engine.plan_bytes_limit = PLAN_BYTES_LIMIT
    engine._plans = {}
    engine._plan_seen = set()
    return engine
