/* Compiled n-gram clipping and LCS length for assay's classic text metrics.
 *
 * The twins in pure Python are in lcs.py; both give the same integers. Tokens are any
 * hashable Python objects (in practice str); two tokens are the same when Python's ==
 * says so, so a hash collision never merges two different tokens:
 *
 *   1. Every token of both sequences is interned into a small open-addressing table
 *      keyed by (hash, object), compared with PyObject_RichCompareBool after the hashes
 *      agree. Each distinct token gets a dense integer id.
 *   2. n-grams are runs of ids; they are counted in a second table keyed by a hash of
 *      the ids and compared id by id, so the n-gram level is exact as well.
 *   3. The LCS length is the bit-parallel algorithm of Allison & Dix (1986) in Hyyro's
 *      (2004) form over 64-bit words, one bit per token of the shorter sequence.
 *
 * Functions:
 *   clipped_counts(h, r, max_n) -> tuple of max_n ints: for n = 1..max_n,
 *       sum over n-grams g of min(count of g in h, count of g in r)
 *       (zeros from the first n with no match on: no n-gram match means no longer one).
 *   clipped_count(h, r, n) -> int: the same for one n.
 *   lcs_length(a, b) -> int.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* Test hook: a mask applied to every hash used here; 0 makes all of them collide. */
static uint64_t hash_mask = ~(uint64_t)0;

typedef struct {
    PyObject *key; /* borrowed, NULL when empty */
    Py_hash_t hash;
    Py_ssize_t id;
} TokSlot;

typedef struct {
    uint64_t hash;
    Py_ssize_t pos; /* start of the n-gram in the hypothesis' ids; -1 when empty */
    Py_ssize_t count; /* occurrences in the hypothesis */
    Py_ssize_t used; /* occurrences of the reference matched so far */
} GramSlot;

#define STACK_TOKENS 256

static size_t
table_size(Py_ssize_t n)
{
    size_t size = 16;
    while (size < (size_t)n * 2)
        size <<= 1;
    return size;
}

/* Give each item of `items` (n of them) an id in `ids`, equal ids for == items.
   Returns 0, or -1 with an exception set. */
static int
intern_tokens(PyObject **items, Py_ssize_t n, TokSlot *table, size_t mask, Py_ssize_t *ids,
              Py_ssize_t *n_ids)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *tok = items[i];
        Py_hash_t h = PyObject_Hash(tok);
        if (h == -1 && PyErr_Occurred())
            return -1;
        h = (Py_hash_t)((uint64_t)h & hash_mask);
        size_t j = (size_t)h & mask;
        size_t perturb = (size_t)h;
        for (;;) {
            TokSlot *s = &table[j];
            if (s->key == NULL) {
                s->key = tok;
                s->hash = h;
                s->id = (*n_ids)++;
                ids[i] = s->id;
                break;
            }
            if (s->key == tok) {
                ids[i] = s->id;
                break;
            }
            if (s->hash == h) {
                /* the comparison may run Python code; the table only borrows keys that
                   the caller's sequences keep alive */
                int eq = PyObject_RichCompareBool(s->key, tok, Py_EQ);
                if (eq < 0)
                    return -1;
                if (eq) {
                    ids[i] = s->id;
                    break;
                }
            }
            perturb >>= 5;
            j = (j * 5 + 1 + perturb) & mask;
        }
    }
    return 0;
}

static inline uint64_t
mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

static inline uint64_t
gram_hash(const Py_ssize_t *ids, Py_ssize_t n)
{
    uint64_t h = (uint64_t)ids[0];
    for (Py_ssize_t k = 1; k < n; k++)
        h = (h * 0x100000001b3ULL) ^ (uint64_t)ids[k];
    return mix64(h) & hash_mask;
}

static inline int
same_gram(const Py_ssize_t *a, const Py_ssize_t *b, Py_ssize_t n)
{
    for (Py_ssize_t k = 0; k < n; k++)
        if (a[k] != b[k])
            return 0;
    return 1;
}

/* Clipped matches of the n-grams (n >= 2) of id sequences ih (nh ids) and ir (nr ids).
   `table` has room for table_size(nh) slots. */
static Py_ssize_t
gram_matches(const Py_ssize_t *ih, Py_ssize_t nh, const Py_ssize_t *ir, Py_ssize_t nr,
             Py_ssize_t n, GramSlot *table)
{
    Py_ssize_t gh = nh - n + 1, gr = nr - n + 1;
    if (gh <= 0 || gr <= 0)
        return 0;
    size_t size = table_size(gh), mask = size - 1;
    for (size_t j = 0; j < size; j++)
        table[j].pos = -1;
    for (Py_ssize_t i = 0; i < gh; i++) {
        uint64_t h = gram_hash(ih + i, n);
        size_t j = (size_t)h & mask;
        for (;;) {
            GramSlot *s = &table[j];
            if (s->pos < 0) {
                s->pos = i;
                s->hash = h;
                s->count = 1;
                s->used = 0;
                break;
            }
            if (s->hash == h && same_gram(ih + s->pos, ih + i, n)) {
                s->count++;
                break;
            }
            j = (j + 1) & mask;
        }
    }
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < gr; i++) {
        uint64_t h = gram_hash(ir + i, n);
        size_t j = (size_t)h & mask;
        for (;;) {
            GramSlot *s = &table[j];
            if (s->pos < 0)
                break;
            if (s->hash == h && same_gram(ih + s->pos, ir + i, n)) {
                if (s->used < s->count) {
                    s->used++;
                    total++;
                }
                break;
            }
            j = (j + 1) & mask;
        }
    }
    return total;
}

/* The work shared by the functions: both sequences as item arrays and their ids. */
typedef struct {
    PyObject *fa, *fb; /* the sequences as tuples */
    Py_ssize_t na, nb, n_ids;
    Py_ssize_t *ids; /* na + nb ids: a's first */
    Py_ssize_t n_ids_a; /* distinct tokens of a (ids 0..n_ids_a-1) */
    TokSlot *tokens;
    void *heap; /* one allocation for everything when the stack is too small */
    Py_ssize_t stack_ids[STACK_TOKENS];
    TokSlot stack_tokens[2 * STACK_TOKENS];
} Pair;

static void
pair_free(Pair *p)
{
    Py_XDECREF(p->fa);
    Py_XDECREF(p->fb);
    PyMem_Free(p->heap);
}

/* Both sequences as tuples, a's tokens interned first (ids 0..n_ids_a-1), then b's. */
static int
pair_init(Pair *p, PyObject *a, PyObject *b)
{
    p->fa = p->fb = NULL;
    p->heap = NULL;
    /* tuples (the metrics pass tuples: no copy), so that == running Python code cannot
       resize what the tables borrow from */
    p->fa = PySequence_Tuple(a);
    if (p->fa == NULL)
        return -1;
    p->fb = PySequence_Tuple(b);
    if (p->fb == NULL)
        return -1;
    p->na = PyTuple_GET_SIZE(p->fa);
    p->nb = PyTuple_GET_SIZE(p->fb);
    Py_ssize_t n = p->na + p->nb;
    size_t size = table_size(n);
    if (n <= STACK_TOKENS) {
        p->ids = p->stack_ids;
        p->tokens = p->stack_tokens;
    }
    else {
        if ((size_t)n > PY_SSIZE_T_MAX / 64) {
            PyErr_NoMemory();
            return -1;
        }
        p->heap = PyMem_Malloc(n * sizeof(Py_ssize_t) + size * sizeof(TokSlot));
        if (p->heap == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        p->tokens = (TokSlot *)p->heap;
        p->ids = (Py_ssize_t *)(p->tokens + size);
    }
    memset(p->tokens, 0, size * sizeof(TokSlot));
    p->n_ids = 0;
    if (intern_tokens(&PyTuple_GET_ITEM(p->fa, 0), p->na, p->tokens, size - 1, p->ids, &p->n_ids) < 0)
        return -1;
    p->n_ids_a = p->n_ids;
    if (intern_tokens(&PyTuple_GET_ITEM(p->fb, 0), p->nb, p->tokens, size - 1, p->ids + p->na,
                      &p->n_ids) < 0)
        return -1;
    return 0;
}

/* Clipped matches for n = first_n..max_n into out[0..max_n-first_n]; 0, or -1 with an
   exception set. */
static int
clipped_all(Pair *p, Py_ssize_t first_n, Py_ssize_t max_n, Py_ssize_t *out)
{
    const Py_ssize_t *ih = p->ids, *ir = p->ids + p->na;
    Py_ssize_t nh = p->na, nr = p->nb, n = first_n;
    for (Py_ssize_t k = first_n; k <= max_n; k++)
        out[k - first_n] = 0;
    if (nh < first_n || nr < first_n)
        return 0;
    if (n == 1) {
        /* unigrams: counts per id */
        Py_ssize_t *cnt = PyMem_Calloc(2 * (size_t)p->n_ids + 1, sizeof(Py_ssize_t));
        if (cnt == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        Py_ssize_t *used = cnt + p->n_ids, total = 0;
        for (Py_ssize_t i = 0; i < nh; i++)
            cnt[ih[i]]++;
        for (Py_ssize_t i = 0; i < nr; i++) {
            Py_ssize_t id = ir[i];
            if (used[id] < cnt[id]) {
                used[id]++;
                total++;
            }
        }
        PyMem_Free(cnt);
        out[0] = total;
        if (total == 0 || max_n < 2)
            return 0;
        n = 2;
    }
    if (nh < n || nr < n)
        return 0;
    GramSlot stack[2 * STACK_TOKENS];
    GramSlot *table = stack;
    if (table_size(nh) > 2 * STACK_TOKENS) {
        table = PyMem_Malloc(table_size(nh) * sizeof(GramSlot));
        if (table == NULL) {
            PyErr_NoMemory();
            return -1;
        }
    }
    for (; n <= max_n; n++) {
        Py_ssize_t total = gram_matches(ih, nh, ir, nr, n, table);
        out[n - first_n] = total;
        if (total == 0)
            break;
    }
    if (table != stack)
        PyMem_Free(table);
    return 0;
}

static PyObject *
ngram_clipped_counts(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "clipped_counts(h, r, max_n) takes 3 arguments");
        return NULL;
    }
    Py_ssize_t max_n = PyLong_AsSsize_t(args[2]);
    if (max_n == -1 && PyErr_Occurred())
        return NULL;
    if (max_n < 1 || max_n > 64) {
        PyErr_SetString(PyExc_ValueError, "max_n must be between 1 and 64");
        return NULL;
    }
    Pair p;
    Py_ssize_t out[64];
    if (pair_init(&p, args[0], args[1]) < 0 || clipped_all(&p, 1, max_n, out) < 0) {
        pair_free(&p);
        return NULL;
    }
    pair_free(&p);
    PyObject *t = PyTuple_New(max_n);
    if (t == NULL)
        return NULL;
    for (Py_ssize_t k = 0; k < max_n; k++) {
        PyObject *v = PyLong_FromSsize_t(out[k]);
        if (v == NULL) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, k, v);
    }
    return t;
}

static PyObject *
ngram_clipped_count(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "clipped_count(h, r, n) takes 3 arguments");
        return NULL;
    }
    Py_ssize_t n = PyLong_AsSsize_t(args[2]);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (n < 1) {
        PyErr_SetString(PyExc_ValueError, "n must be at least 1");
        return NULL;
    }
    Pair p;
    Py_ssize_t out;
    if (pair_init(&p, args[0], args[1]) < 0 || clipped_all(&p, n, n, &out) < 0) {
        pair_free(&p);
        return NULL;
    }
    pair_free(&p);
    return PyLong_FromSsize_t(out);
}

#if defined(__GNUC__) || defined(__clang__)
#define POPCOUNT64(x) __builtin_popcountll(x)
#else
static inline int
POPCOUNT64(uint64_t x)
{
    x = x - ((x >> 1) & 0x5555555555555555ULL);
    x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
    x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0fULL;
    return (int)((x * 0x0101010101010101ULL) >> 56);
}
#endif

/* LCS length of id sequences `bits` (m ids, the shorter) and `other` (n ids), all ids
   below k. Memory is linear: for more than 64 bits the mask of each token of `other` is
   written into one scratch vector from the token's positions and cleared after use. */
static Py_ssize_t
lcs_ids(const Py_ssize_t *bits, Py_ssize_t m, const Py_ssize_t *other, Py_ssize_t n, Py_ssize_t k,
        int *error)
{
    Py_ssize_t words = (m + 63) / 64;
    uint64_t top = (m % 64) ? (((uint64_t)1 << (m % 64)) - 1) : ~(uint64_t)0;
    if (words == 1) {
        uint64_t *masks = PyMem_Calloc((size_t)k, sizeof(uint64_t));
        if (masks == NULL) {
            *error = 1;
            return 0;
        }
        for (Py_ssize_t i = 0; i < m; i++)
            masks[bits[i]] |= (uint64_t)1 << i;
        uint64_t x = top;
        for (Py_ssize_t i = 0; i < n; i++) {
            uint64_t u = x & masks[other[i]];
            x = (x + u) | (x - u);
        }
        PyMem_Free(masks);
        return m - POPCOUNT64(x & top);
    }
    /* positions of each id in `bits`, grouped by id: start[id] .. start[id + 1] in pos */
    size_t cells = (size_t)(k + 1) + (size_t)m + (size_t)k;
    Py_ssize_t *start = PyMem_Calloc(cells, sizeof(Py_ssize_t));
    uint64_t *vec = PyMem_Calloc(2 * (size_t)words, sizeof(uint64_t));
    if (start == NULL || vec == NULL) {
        PyMem_Free(start);
        PyMem_Free(vec);
        *error = 1;
        return 0;
    }
    Py_ssize_t *pos = start + (k + 1), *fill = pos + m;
    for (Py_ssize_t i = 0; i < m; i++)
        start[bits[i] + 1]++;
    for (Py_ssize_t id = 0; id < k; id++) {
        start[id + 1] += start[id];
        fill[id] = start[id];
    }
    for (Py_ssize_t i = 0; i < m; i++)
        pos[fill[bits[i]]++] = i;
    uint64_t *v = vec, *mk = vec + words;
    for (Py_ssize_t w = 0; w < words; w++)
        v[w] = ~(uint64_t)0;
    for (Py_ssize_t i = 0; i < n; i++) {
        const Py_ssize_t *p0 = pos + start[other[i]], *p1 = pos + start[other[i] + 1];
        for (const Py_ssize_t *q = p0; q < p1; q++)
            mk[*q / 64] |= (uint64_t)1 << (*q % 64);
        uint64_t carry = 0;
        for (Py_ssize_t w = 0; w < words; w++) {
            uint64_t x = v[w], u = x & mk[w];
            uint64_t s1 = x + u;
            uint64_t c1 = s1 < x;
            uint64_t sum = s1 + carry;
            carry = c1 | (sum < s1);
            /* v - u: u's bits are a subset of v's in every word, so no borrow */
            v[w] = sum | (x - u);
        }
        for (const Py_ssize_t *q = p0; q < p1; q++)
            mk[*q / 64] = 0;
    }
    Py_ssize_t ones = 0;
    for (Py_ssize_t w = 0; w < words - 1; w++)
        ones += POPCOUNT64(v[w]);
    ones += POPCOUNT64(v[words - 1] & top);
    PyMem_Free(start);
    PyMem_Free(vec);
    return m - ones;
}

static PyObject *
ngram_lcs_length(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "lcs_length(a, b) takes 2 arguments");
        return NULL;
    }
    Pair p;
    if (pair_init(&p, args[0], args[1]) < 0) {
        pair_free(&p);
        return NULL;
    }
    Py_ssize_t na = p.na, nb = p.nb, ka = p.n_ids_a;
    if (na == 0 || nb == 0) {
        pair_free(&p);
        return PyLong_FromLong(0);
    }
    /* only the tokens both sides have can be in the LCS: keep those, renumbered 0..kc-1
       (remap[id] = new id + 1 for a's ids that b has too, 0 otherwise) */
    Py_ssize_t *remap = PyMem_Calloc((size_t)ka + (size_t)na + (size_t)nb, sizeof(Py_ssize_t));
    if (remap == NULL) {
        pair_free(&p);
        return PyErr_NoMemory();
    }
    Py_ssize_t *sa = remap + ka;
    const Py_ssize_t *ia = p.ids, *ib = p.ids + na;
    Py_ssize_t kc = 0, ma = 0, mb = 0;
    for (Py_ssize_t i = 0; i < nb; i++)
        if (ib[i] < ka && remap[ib[i]] == 0)
            remap[ib[i]] = ++kc;
    for (Py_ssize_t i = 0; i < na; i++)
        if (remap[ia[i]])
            sa[ma++] = remap[ia[i]] - 1;
    Py_ssize_t *sb = sa + ma;
    for (Py_ssize_t i = 0; i < nb; i++)
        if (ib[i] < ka)
            sb[mb++] = remap[ib[i]] - 1;
    pair_free(&p);
    Py_ssize_t length = 0;
    int error = 0;
    if (ma > 0) {
        /* bits index the shorter sequence */
        if (ma <= mb)
            length = lcs_ids(sa, ma, sb, mb, kc, &error);
        else
            length = lcs_ids(sb, mb, sa, ma, kc, &error);
    }
    PyMem_Free(remap);
    if (error)
        return PyErr_NoMemory();
    return PyLong_FromSsize_t(length);
}

static PyObject *
ngram_set_hash_mask(PyObject *self, PyObject *arg)
{
    unsigned long long m = PyLong_AsUnsignedLongLongMask(arg);
    if (m == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    uint64_t old = hash_mask;
    hash_mask = (uint64_t)m;
    return PyLong_FromUnsignedLongLong(old);
}

static PyMethodDef ngram_methods[] = {
    {"clipped_counts", (PyCFunction)(void (*)(void))ngram_clipped_counts, METH_FASTCALL,
     "clipped_counts(h, r, max_n) -> tuple: for n = 1..max_n, sum over the n-grams g of "
     "min(count of g in h, count of g in r); zeros after the first n with no match."},
    {"clipped_count", (PyCFunction)(void (*)(void))ngram_clipped_count, METH_FASTCALL,
     "clipped_count(h, r, n) -> int: clipped matches of the n-grams of h and r."},
    {"lcs_length", (PyCFunction)(void (*)(void))ngram_lcs_length, METH_FASTCALL,
     "lcs_length(a, b) -> int: length of a longest common subsequence (items compared by ==)."},
    {"_set_hash_mask", (PyCFunction)ngram_set_hash_mask, METH_O,
     "Test hook: AND every hash with this mask (0: all hashes collide); returns the old mask."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef ngram_module = {
    PyModuleDef_HEAD_INIT, "ngram_native",
    "Compiled n-gram clipping and LCS length (see assay.metrics.text.lcs for the Python twins).", -1,
    ngram_methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC
PyInit_ngram_native(void)
{
    return PyModule_Create(&ngram_module);
}
