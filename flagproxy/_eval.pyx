# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The compiled evaluator: the same API and the same answers as flagproxy/_eval_py.py, in C.

The compiler's model (flagproxy/compiler/model.py) is copied once per snapshot into typed classes, so
the per-request walk touches C fields, not Python attributes. MurmurHash3 runs in C over the UTF-8 bytes
the str objects already cache; string, set and tuple operations go through the CPython C API; the body is
assembled with one allocation and memcpy of fragments built at compile time. Rare operators (dates,
semver, regex, CIDR, custom strategies) call the same Python helpers as the pure twin, so the two agree
by construction; their parsed context values are cached for the length of one request.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF
from cpython.unicode cimport PyUnicode_Tailmatch
from libc.math cimport fabs
from libc.stdint cimport uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy


cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object unicode, Py_ssize_t* size) except NULL
    int PyUnicode_Contains(object container, object element) except -1


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
cdef int FIELD_ENVIRONMENT = _m.FIELD_ENVIRONMENT
cdef int FIELD_APP_NAME = _m.FIELD_APP_NAME
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
cdef double FLOAT_EPSILON = 2.220446049250313e-16

_STANDARD_FIELDS = _m.STANDARD_FIELDS
_FIELD_CODES = _m.FIELD_CODES


# ------------------------------------------------------------------------------------------- hashing

cdef inline uint32_t _rotl32(uint32_t x, int r) noexcept nogil:
    return (x << r) | (x >> (32 - r))


cdef uint32_t _murmur3_32(const uint8_t* data, Py_ssize_t length, uint32_t seed) noexcept nogil:
    cdef uint32_t c1 = 0xCC9E2D51U
    cdef uint32_t c2 = 0x1B873593U
    cdef uint32_t h = seed
    cdef uint32_t k
    cdef Py_ssize_t nblocks = length // 4
    cdef Py_ssize_t i
    cdef const uint8_t* tail
    for i in range(nblocks):
        k = (<uint32_t>data[4 * i] | (<uint32_t>data[4 * i + 1] << 8)
             | (<uint32_t>data[4 * i + 2] << 16) | (<uint32_t>data[4 * i + 3] << 24))
        k *= c1
        k = _rotl32(k, 15)
        k *= c2
        h ^= k
        h = _rotl32(h, 13)
        h = h * 5 + 0xE6546B64U
    tail = data + nblocks * 4
    k = 0
    if (length & 3) == 3:
        k ^= <uint32_t>tail[2] << 16
    if (length & 3) >= 2:
        k ^= <uint32_t>tail[1] << 8
    if (length & 3) >= 1:
        k ^= tail[0]
        k *= c1
        k = _rotl32(k, 15)
        k *= c2
        h ^= k
    h ^= <uint32_t>length
    h ^= h >> 16
    h *= 0x85EBCA6BU
    h ^= h >> 13
    h *= 0xC2B2AE35U
    h ^= h >> 16
    return h


cdef uint32_t _normalized_hash(bytes group_prefix, str identifier, uint32_t modulus, uint32_t seed) except 0:
    """murmur3("<group>:<identifier>") % modulus + 1; group_prefix already ends with ':'."""
    cdef Py_ssize_t id_len
    cdef const char* id_utf8
    cdef bytes fallback
    cdef Py_ssize_t prefix_len = PyBytes_GET_SIZE(group_prefix)
    cdef char stack_buffer[512]
    cdef char* buffer = stack_buffer
    cdef uint32_t h
    try:
        id_utf8 = PyUnicode_AsUTF8AndSize(identifier, &id_len)
    except UnicodeEncodeError:  # lone surrogates: hash the bytes Python would write
        fallback = identifier.encode("utf-8", "surrogatepass")
        id_utf8 = PyBytes_AS_STRING(fallback)
        id_len = PyBytes_GET_SIZE(fallback)
    if prefix_len + id_len > 512:
        buffer = <char*>malloc(prefix_len + id_len)
        if buffer == NULL:
            raise MemoryError()
    memcpy(buffer, PyBytes_AS_STRING(group_prefix), prefix_len)
    memcpy(buffer + prefix_len, id_utf8, id_len)
    h = _murmur3_32(<const uint8_t*>buffer, prefix_len + id_len, seed)
    if buffer != stack_buffer:
        free(buffer)
    return h % modulus + 1


def normalized_hash(str group, str identifier, uint32_t modulus, uint32_t seed=0):
    """For tests: the same function as flagproxy._murmur_py.normalized_hash."""
    return _normalized_hash((group + ":").encode("utf-8", "surrogatepass"), identifier, modulus, seed)


# ------------------------------------------------------------------------------------------- randomness

cdef uint64_t _rng_state = int.from_bytes(_os.urandom(8), "little") | 1


cdef inline uint32_t _random_between_1_and(uint32_t upper) noexcept:
    """Uniform enough in 1..upper (xorshift64*; rollouts need no cryptographic randomness)."""
    global _rng_state
    _rng_state ^= _rng_state >> 12
    _rng_state ^= _rng_state << 25
    _rng_state ^= _rng_state >> 27
    return <uint32_t>(((_rng_state * 0x2545F4914F6CDD1DULL) >> 32) % upper) + 1


# ------------------------------------------------------------------------------------------- context

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


cdef class Context:
    """An evaluation context, normalised like Yggdrasil's `Context::from_map` (evaluation.md 2.2)."""

    cdef object user_id
    cdef object session_id
    cdef object environment
    cdef object app_name
    cdef object current_time
    cdef object remote_address
    cdef dict properties
    cdef public bint deterministic
    cdef object now
    cdef dict numbers
    cdef dict others

    def __init__(self, raw):
        cdef dict source = raw if type(raw) is dict else dict(raw)
        cdef dict properties = {}
        cdef object raw_properties = source.get("properties")
        cdef object text
        if raw_properties is not None:
            if type(raw_properties) is not dict:
                raw_properties = dict(raw_properties) if hasattr(raw_properties, "keys") else {}
            for key, value in (<dict>raw_properties).items():
                text = _property_text(value)
                if text is not None:
                    properties[key] = text
        self.user_id = self._standard(source, properties, "userId")
        self.session_id = self._standard(source, properties, "sessionId")
        self.environment = self._standard(source, properties, "environment")
        self.app_name = self._standard(source, properties, "appName")
        self.current_time = self._standard(source, properties, "currentTime")
        self.remote_address = self._standard(source, properties, "remoteAddress")
        if len(source) > 0:
            for key, value in source.items():
                if type(value) is str and key != "properties" and key not in _FIELD_CODES:
                    properties[key] = value
        self.properties = properties
        self.deterministic = True
        self.now = None
        self.numbers = None
        self.others = None

    cdef inline object _standard(self, dict source, dict properties, str name):
        cdef object value
        if name in source:
            value = source[name]
            return value if type(value) is str else _property_text(value)
        if name in properties:
            return properties.pop(name)
        return None

    cdef inline object field(self, int code):
        if code == FIELD_USER_ID:
            return self.user_id
        if code == FIELD_SESSION_ID:
            return self.session_id
        if code == FIELD_ENVIRONMENT:
            return self.environment
        if code == FIELD_APP_NAME:
            return self.app_name
        if code == FIELD_CURRENT_TIME:
            return self.current_time
        return self.remote_address

    cdef inline object lookup(self, int code, object prop):
        """A constraint's or rollout's field; a missing currentTime reads as now (Yggdrasil)."""
        cdef object value
        if code == FIELD_PROPERTY:
            return self.properties.get(prop)
        value = self.field(code)
        if value is None and code == FIELD_CURRENT_TIME:
            return self.current_time_now()
        return value

    cdef inline object lookup_plain(self, int code, object prop):
        if code == FIELD_PROPERTY:
            return self.properties.get(prop)
        return self.field(code)

    cdef object current_time_now(self):
        if self.now is None:
            self.deterministic = False
            self.now = _time.strftime("%Y-%m-%dT%H:%M:%SZ", _time.gmtime())
        return self.now

    cdef object number(self, str value):
        if self.numbers is None:
            self.numbers = {}
        cdef object found = self.numbers.get(value, self)
        if found is self:
            found = _values.parse_context_number(value)
            self.numbers[value] = found
        return found

    cdef object parsed(self, int kind, str value):
        """Dates, semver keys and addresses, parsed once per request."""
        if self.others is None:
            self.others = {}
        key = (kind, value)
        cdef object found = self.others.get(key, self)
        if found is self:
            if kind == KIND_DATE:
                found = _values.parse_date(value)
            elif kind == KIND_SEMVER:
                found = _values.semver_key(value)
            else:
                found = _values.parse_address(value)
            self.others[key] = found
        return found

    cdef inline uint32_t random(self, uint32_t upper) noexcept:
        self.deterministic = False
        return _random_between_1_and(upper)

    def as_dict(self):
        """The context as a custom strategy receives it."""
        found = {}
        for code, name in enumerate(_STANDARD_FIELDS):
            value = self.field(code)
            if value is not None:
                found[name] = value
        found["properties"] = dict(self.properties)
        return found


cdef int ADDRESS_KIND = 99


# ------------------------------------------------------------------------------------- compiled model

cdef class CConstraint:
    cdef int field
    cdef object prop
    cdef int op
    cdef bint inverted
    cdef bint case_insensitive
    cdef int cmp
    cdef int kind
    cdef object values  # frozenset, tuple of str, regex or None, networks, or a comparison target
    cdef double number

    def __init__(self, c):
        self.field = c.field
        self.prop = c.prop
        self.op = c.op
        self.inverted = c.inverted
        self.case_insensitive = c.case_insensitive
        self.cmp = c.cmp
        self.kind = c.kind
        self.values = c.values
        self.number = c.values if (c.op == OP_COMPARE and c.kind == KIND_NUMBER) else 0.0


cdef class CVariant:
    cdef object name
    cdef uint32_t weight
    cdef tuple overrides
    cdef int outcome

    def __init__(self, v):
        self.name = v.name
        self.weight = v.weight
        self.overrides = tuple(v.overrides)
        self.outcome = v.outcome


cdef class CVariantList:
    cdef tuple variants
    cdef uint32_t total
    cdef bytes group_prefix
    cdef int stickiness
    cdef object stickiness_prop
    cdef bint has_overrides

    def __init__(self, vl):
        self.variants = tuple(CVariant(v) for v in vl.variants)
        self.total = vl.total
        self.group_prefix = (vl.group + ":").encode("utf-8", "surrogatepass")
        self.stickiness = vl.stickiness
        self.stickiness_prop = vl.stickiness_prop
        self.has_overrides = any(v.overrides for v in vl.variants)


cdef class CStrategy:
    cdef int kind
    cdef tuple constraints
    cdef int percentage
    cdef bytes group_prefix  # None: the evaluated toggle's name
    cdef int stickiness
    cdef object stickiness_prop
    cdef frozenset ids
    cdef tuple networks
    cdef bint constant
    cdef object custom
    cdef dict parameters
    cdef CVariantList variants

    def __init__(self, s):
        self.kind = s.kind
        self.constraints = tuple(CConstraint(c) for c in s.constraints)
        self.percentage = s.percentage
        self.group_prefix = None if s.group is None else (s.group + ":").encode("utf-8", "surrogatepass")
        self.stickiness = s.stickiness
        self.stickiness_prop = s.stickiness_prop
        self.ids = frozenset(s.ids)
        self.networks = tuple(s.networks)
        self.constant = s.constant
        self.custom = s.custom
        self.parameters = dict(s.parameters)
        self.variants = None if s.variants is None else CVariantList(s.variants)


cdef class CDependency:
    cdef int parent
    cdef bint enabled
    cdef frozenset variants

    def __init__(self, d):
        self.parent = d.parent
        self.enabled = d.enabled
        self.variants = d.variants


cdef class CFlag:
    cdef readonly object name
    cdef bytes name_prefix
    cdef bint enabled
    cdef bint broken
    cdef bint has_strategies
    cdef tuple strategies
    cdef CVariantList variants
    cdef tuple dependencies
    cdef tuple outcomes
    cdef tuple enabled_list
    cdef tuple enabled_named
    cdef bytes disabled_all
    cdef bytes disabled_named

    def __init__(self, f):
        self.name = f.name
        self.name_prefix = (f.name + ":").encode("utf-8", "surrogatepass")
        self.enabled = f.enabled
        self.broken = f.broken
        self.has_strategies = f.has_strategies
        self.strategies = tuple(CStrategy(s) for s in f.strategies)
        self.variants = None if f.variants is None else CVariantList(f.variants)
        self.dependencies = tuple(CDependency(d) for d in f.dependencies)
        self.outcomes = tuple(f.outcomes)
        self.enabled_list = tuple(f.enabled_list)
        self.enabled_named = tuple(f.enabled_named)
        self.disabled_all = f.disabled_all
        self.disabled_named = f.disabled_named


# ------------------------------------------------------------------------------------------ constraints

cdef bint _any_prefix(str text, tuple candidates, int direction) except -1:
    cdef object candidate
    for candidate in candidates:
        if PyUnicode_Tailmatch(text, candidate, 0, len(text), direction):
            return True
    return False


cdef bint _compare(CConstraint c, object actual) except -1:
    cdef double number
    if actual is None:
        return False
    if c.kind == KIND_NUMBER:
        number = actual
        if c.cmp == CMP_EQ:
            return fabs(number - c.number) < FLOAT_EPSILON
        if c.cmp == CMP_GT:
            return number > c.number
        if c.cmp == CMP_GTE:
            return number >= c.number
        if c.cmp == CMP_LT:
            return number < c.number
        return number <= c.number
    if c.cmp == CMP_EQ:
        return actual == c.values
    if c.cmp == CMP_GT:
        return actual > c.values
    if c.cmp == CMP_GTE:
        return actual >= c.values
    if c.cmp == CMP_LT:
        return actual < c.values
    return actual <= c.values


cdef bint _operator_holds(CConstraint c, str value, Context ctx) except -1:
    cdef int op = c.op
    cdef str text
    cdef object candidate
    if op == OP_STR_STARTS_WITH or op == OP_STR_ENDS_WITH:
        text = value.lower() if c.case_insensitive else value
        return _any_prefix(text, <tuple>c.values, -1 if op == OP_STR_STARTS_WITH else 1)
    if op == OP_STR_CONTAINS:
        text = value.lower() if c.case_insensitive else value
        for candidate in <tuple>c.values:
            if PyUnicode_Contains(text, candidate):
                return True
        return False
    if op == OP_COMPARE:
        if c.kind == KIND_NUMBER:
            return _compare(c, ctx.number(value))
        return _compare(c, ctx.parsed(c.kind, value))
    if op == OP_REGEX:
        return c.values is not None and c.values.search(value) is not None
    if op == OP_IN_CIDR:
        address = ctx.parsed(ADDRESS_KIND, value)
        return address is not None and _values.networks_contain(c.values, address)
    return False


cdef bint _constraint_holds(CConstraint c, Context ctx) except -1:
    cdef int op = c.op
    cdef object value
    cdef bint result
    if op == OP_IN:
        if not c.values:
            result = False
        else:
            value = ctx.lookup(c.field, c.prop)
            result = value is not None and value in <frozenset>c.values
    elif op == OP_NOT_IN:
        if not c.values:
            result = True
        else:
            value = ctx.lookup(c.field, c.prop)
            result = value is None or value not in <frozenset>c.values
    elif op == OP_FALSE:
        return False
    else:
        value = ctx.lookup(c.field, c.prop)
        result = False if value is None else _operator_holds(c, <str>value, ctx)
    return result != c.inverted


# ------------------------------------------------------------------------------------------ strategies

cdef object _rollout_seed(CStrategy s, Context ctx):
    cdef object seed
    if s.stickiness == STICKY_DEFAULT:
        seed = ctx.user_id
        if seed is None:
            seed = ctx.session_id
        if seed is None:
            seed = str(ctx.random(9999))
        return seed
    if s.stickiness == STICKY_RANDOM:
        return str(ctx.random(9999))
    return ctx.lookup(s.stickiness, s.stickiness_prop)


cdef bint _condition_holds(CStrategy s, Context ctx, bytes toggle_prefix) except -1:
    cdef int kind = s.kind
    cdef object ident
    if kind == STRATEGY_DEFAULT:
        return True
    if kind == STRATEGY_FLEXIBLE_ROLLOUT:
        ident = _rollout_seed(s, ctx)
        if ident is None:
            return False
        return _normalized_hash(
            s.group_prefix if s.group_prefix is not None else toggle_prefix, ident, 100, 0
        ) <= <uint32_t>s.percentage
    if kind == STRATEGY_USER_WITH_ID:
        return ctx.user_id is not None and ctx.user_id in s.ids
    if kind == STRATEGY_GRADUAL_USER_ID or kind == STRATEGY_GRADUAL_SESSION_ID:
        ident = ctx.user_id if kind == STRATEGY_GRADUAL_USER_ID else ctx.session_id
        return ident is not None and _normalized_hash(s.group_prefix, ident, 100, 0) <= <uint32_t>s.percentage
    if kind == STRATEGY_GRADUAL_RANDOM:
        # Yggdrasil draws from 1..99, so 100 is always on and 0 never.
        return <int>ctx.random(99) < s.percentage
    if kind == STRATEGY_REMOTE_ADDRESS:
        if ctx.remote_address is None:
            return False
        address = ctx.parsed(ADDRESS_KIND, ctx.remote_address)
        return address is not None and _values.networks_contain(s.networks, address)
    if kind == STRATEGY_CONSTANT:
        return s.constant
    if kind == STRATEGY_CUSTOM:
        ctx.deterministic = False  # a custom strategy may use anything; never cache its answers
        try:
            return bool(s.custom.is_enabled(s.parameters, ctx.as_dict()))
        except Exception:  # a user's strategy failing is that strategy being off
            return False
    return False


cdef CStrategy _first_match(CFlag flag, Context ctx, bytes toggle_prefix):
    cdef CStrategy s
    cdef CConstraint c
    cdef bint ok
    for s in flag.strategies:
        ok = True
        for c in s.constraints:
            if not _constraint_holds(c, ctx):
                ok = False
                break
        if ok and _condition_holds(s, ctx, toggle_prefix):
            return s
    return None


# -------------------------------------------------------------------------------------------- variants

cdef CVariant _pick_variant(CVariantList variants, Context ctx):
    cdef CVariant variant
    cdef object seed
    cdef uint32_t target, cumulative
    if variants is None:
        return None
    if variants.has_overrides:
        for variant in variants.variants:
            for field, prop, wanted in variant.overrides:
                seed = ctx.lookup_plain(field, prop)
                if seed is not None and seed in wanted:
                    return variant
    if variants.total == 0:
        return None
    if variants.stickiness == STICKY_DEFAULT:
        seed = ctx.user_id
        if seed is None:
            seed = ctx.session_id
    else:
        seed = ctx.lookup_plain(variants.stickiness, variants.stickiness_prop)
    if seed is None:
        target = ctx.random(variants.total)
    else:
        target = _normalized_hash(variants.group_prefix, seed, variants.total, VARIANT_SEED)
    cumulative = 0
    for variant in variants.variants:
        cumulative += variant.weight
        if cumulative >= target:
            return variant
    return None


cdef inline CVariantList _variant_list(CFlag flag, CStrategy matched):
    if matched is not None and matched.variants is not None:
        return matched.variants
    return flag.variants


# ---------------------------------------------------------------------------------------------- engine

cdef class Engine:
    """Evaluates a compiled snapshot. Built once per snapshot; safe to share between requests."""

    cdef readonly tuple flags
    cdef readonly dict index
    cdef tuple compiled
    cdef Py_ssize_t prefix_len
    cdef Py_ssize_t suffix_len

    implementation = "compiled"

    def __init__(self, flags):
        self.flags = tuple(flags)
        self.index = {f.name: i for i, f in enumerate(self.flags)}
        self.compiled = tuple(CFlag(f) for f in self.flags)
        self.prefix_len = len(_BODY_PREFIX)
        self.suffix_len = len(_BODY_SUFFIX)

    cdef bint _dependency_holds(self, CDependency dep, Context ctx, CFlag child) except -1:
        cdef CFlag parent
        cdef CStrategy matched = None
        cdef CVariant variant
        cdef bint parent_on
        if dep.parent < 0:
            return False
        parent = <CFlag>self.compiled[dep.parent]
        if len(parent.dependencies) > 0:
            return False  # no transitive dependencies (and so no cycles)
        # The parent is evaluated with the child's context and the child's name as default rollout group.
        if not parent.broken:
            matched = _first_match(parent, ctx, child.name_prefix)
        parent_on = parent.enabled and not parent.broken and (matched is not None or not parent.has_strategies)
        if dep.variants:
            variant = _pick_variant(_variant_list(parent, matched), ctx)
            if variant is not None and variant.name not in dep.variants:
                return False
        return parent_on == dep.enabled

    cdef int _outcome(self, CFlag flag, Context ctx) except -2:
        """-1 when the flag is off for this context, else the index of its enabled fragment."""
        cdef CDependency dep
        cdef CStrategy matched
        cdef CVariant variant
        if not flag.enabled or flag.broken:
            return -1
        for dep in flag.dependencies:
            if not self._dependency_holds(dep, ctx, flag):
                return -1
        matched = _first_match(flag, ctx, flag.name_prefix)
        if matched is None and flag.has_strategies:
            return -1
        variant = _pick_variant(_variant_list(flag, matched), ctx)
        return 0 if variant is None else variant.outcome

    # Python-object API (tests, SDK-style use) --------------------------------------------------------

    def is_enabled(self, name, context):
        i = self.index.get(name)
        return i is not None and self._outcome(<CFlag>self.compiled[i], Context(context)) >= 0

    def get_variant(self, name, context):
        i = self.index.get(name)
        cdef int found = -1
        cdef CFlag flag
        if i is not None:
            flag = <CFlag>self.compiled[i]
            found = self._outcome(flag, Context(context))
        if found < 0:
            return {"name": "disabled", "enabled": False, "feature_enabled": False}
        if found == 0:
            return {"name": "disabled", "enabled": False, "feature_enabled": True}
        variant_name, payload, _ = flag.outcomes[found]
        result = {"name": variant_name, "enabled": True, "feature_enabled": True}
        if payload is not None:
            result["payload"] = payload
        return result

    # Response bodies (the proxy's hot path) ----------------------------------------------------------

    def evaluate_all_body(self, context, bint include_disabled=False):
        cdef Context ctx = Context(context)
        cdef Py_ssize_t n = len(self.compiled)
        cdef PyObject** parts = <PyObject**>malloc((n if n > 0 else 1) * sizeof(PyObject*))
        cdef Py_ssize_t count = 0, total, i
        cdef CFlag flag
        cdef int found
        cdef bytes fragment
        if parts == NULL:
            raise MemoryError()
        try:
            total = self.prefix_len + self.suffix_len
            for i in range(n):
                flag = <CFlag>self.compiled[i]
                found = self._outcome(flag, ctx)
                if found >= 0:
                    fragment = <bytes>flag.enabled_list[found]
                elif include_disabled:
                    fragment = flag.disabled_all
                else:
                    continue
                # Borrowed: the fragments live as long as this engine, which outlives the call.
                parts[count] = <PyObject*>fragment
                total += PyBytes_GET_SIZE(fragment)
                count += 1
            return _join(parts, count, total), ctx.deterministic
        finally:
            free(parts)

    def evaluate_named_body(self, context, names):
        cdef Context ctx = Context(context)
        cdef list fragments = []
        cdef list outcomes = []
        cdef CFlag flag
        cdef int found
        for name in names:
            i = self.index.get(name)
            if i is None:
                fragments.append(_unknown_named(name))
                outcomes.append((name, False, "disabled"))
                continue
            flag = <CFlag>self.compiled[i]
            found = self._outcome(flag, ctx)
            if found >= 0:
                fragments.append(flag.enabled_named[found])
                outcomes.append((name, True, flag.outcomes[found][0]))
            else:
                fragments.append(flag.disabled_named)
                outcomes.append((name, False, "disabled"))
        return _BODY_PREFIX + b",".join(fragments) + _BODY_SUFFIX, ctx.deterministic, outcomes


cdef bytes _join(PyObject** parts, Py_ssize_t count, Py_ssize_t total):
    """b'{"toggles":[' + b','.join(parts) + b']}' in one allocation."""
    cdef Py_ssize_t i, size
    if count > 1:
        total += count - 1
    cdef bytes body = PyBytes_FromStringAndSize(NULL, total)
    cdef char* out = PyBytes_AS_STRING(body)
    cdef bytes prefix = _BODY_PREFIX
    cdef bytes suffix = _BODY_SUFFIX
    memcpy(out, PyBytes_AS_STRING(prefix), PyBytes_GET_SIZE(prefix))
    out += PyBytes_GET_SIZE(prefix)
    for i in range(count):
        if i:
            out[0] = b","
            out += 1
        size = PyBytes_GET_SIZE(<bytes>parts[i])
        memcpy(out, PyBytes_AS_STRING(<bytes>parts[i]), size)
        out += size
    memcpy(out, PyBytes_AS_STRING(suffix), PyBytes_GET_SIZE(suffix))
    return body
