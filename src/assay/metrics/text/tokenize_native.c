/* Compiled twin of word_tokenize.py's whole-text path (``_fast_tokens``) for ASCII prose.
 *
 * ``tokenize(text)`` returns the list of tokens ``word_tokenize_python(text)`` gives, or None when
 * the text is outside what this file decides exactly; the caller then runs the Python path. It
 * accepts a text when it is ASCII and made of letters, digits, whitespace and the marks
 * , . : ' " ? ! ; @ # $ % & * [ ] ( ) { } < > - / \ | ~ ^ = + _
 * with none of: a comma or colon before a comma or colon; an apostrophe not between two
 * letters/digits; 'tis or 'twas (any case); an ellipsis ("..") together with a double quote or
 * with a closing bracket and a tab/newline/CR/VT/FF. Backquotes and control characters are left
 * to Python too.
 *
 * On such a text the Python path's tokens are: Punkt decides where sentences end (the candidate
 * walk of NLTK's ``_match_potential_end_contexts``, then a decision per candidate); a sentence-
 * final period is split off (behind closing brackets, closing quotes and spaces; never the last
 * period of an ellipsis, as NLTK's final-period rule needs another character before it); a double
 * quote becomes `` where it opens (sentence start, after a space or an opening bracket, or after a
 * sentence-initial quote) and '' elsewhere; the pad marks, "--" and each run of two or more
 * periods become tokens of their own; clitics ('s 'm 'd 'll 're 've n't) are split off, then the
 * MacIntyre contractions (cannot gimme gonna gotta lemme wanna d'ye more'n). Without
 * double quotes (and without closing brackets next to tabs/newlines) only the periods' decisions
 * are needed (punkt.py's ``period_breaks``); with them, the exact sentence spans with Punkt's
 * boundary realignment (punkt.py's ``sentence_spans``). Every token is a slice of the text or a
 * quote token, so this file walks the text and cuts it.
 *
 * Decisions: the common case for a period ("word. Next" with a plain word before and a plain token
 * after) is decided here from the abbreviation and collocation sets; every other context is
 * handed to punkt.py's memoised decision function. Both come from ``configure(loader)``:
 * ``loader()`` -> (abbreviations, collocations, decide), called once, when a first candidate needs
 * deciding.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* character classes */
#define C_ALPHA 1   /* A-Z a-z */
#define C_DIGIT 2   /* 0-9 */
#define C_SPACE 4   /* ' ' */
#define C_WS 8      /* \t \n \r \v \f (not the space) */
#define C_PAD 16    /* , : ? ! ; @ # $ % & * [ ] ( ) { } < > : a token of their own */
#define C_OTHER 32  /* . ' - / \ | ~ ^ = + _ : handled or left in words */
#define C_NONWORD 64 /* Punkt: a mark that may follow a sentence end directly */
#define C_NMT 128   /* n m t N M T: doubled in each contraction word without an apostrophe */

static unsigned char cls[128];

static PyObject *loader = NULL;      /* configure()'s callable */
static PyObject *abbrevs = NULL;     /* frozenset of str */
static PyObject *collocs = NULL;     /* frozenset of (str, str) */
static PyObject *decide = NULL;      /* context str -> bool */
static PyObject *colloc_firsts = NULL; /* set of the first types of the collocations */
static PyObject *number_type = NULL; /* "##number##" */
static PyObject *open_quote = NULL;  /* "``" */
static PyObject *close_quote = NULL; /* "''" */

static void init_classes(void) {
    int c;
    memset(cls, 0, sizeof cls);
    for (c = 'a'; c <= 'z'; c++) cls[c] |= C_ALPHA;
    for (c = 'A'; c <= 'Z'; c++) cls[c] |= C_ALPHA;
    for (c = '0'; c <= '9'; c++) cls[c] |= C_DIGIT;
    for (const char *p = "nmtNMT"; *p; p++) cls[(unsigned char)*p] |= C_NMT;
    cls[' '] |= C_SPACE;
    for (const char *p = "\t\n\r\x0b\x0c"; *p; p++) cls[(unsigned char)*p] |= C_WS;
    for (const char *p = ",:?!;@#$%&*[](){}<>"; *p; p++) cls[(unsigned char)*p] |= C_PAD;
    for (const char *p = ".'\"-/\\|~^=+_"; *p; p++) cls[(unsigned char)*p] |= C_OTHER;
    for (const char *p = ")\";}]*:@'({[?!"; *p; p++) cls[(unsigned char)*p] |= C_NONWORD;
}

#define IS_WS(c) (cls[(unsigned char)(c)] & (C_SPACE | C_WS))
#define IS_ALNUM(c) (cls[(unsigned char)(c)] & (C_ALPHA | C_DIGIT))

static inline char lower(char c) { return (c >= 'A' && c <= 'Z') ? (char)(c + 32) : c; }

/* Does the lower-cased text contain `word` at i? */
static inline int at_ci(const char *s, Py_ssize_t n, Py_ssize_t i, const char *word, Py_ssize_t len) {
    if (i + len > n) return 0;
    for (Py_ssize_t k = 0; k < len; k++)
        if (lower(s[i + k]) != word[k]) return 0;
    return 1;
}

/* word_tokenize.py's _has_contraction (could a MacIntyre contraction rule match?), checked
 * where the scan meets a doubled n, m or t (each of cannot gimme gonna gotta lemme wanna has
 * one two characters in) or an apostrophe (d'ye more'n 'tis 'twas). */
static int contraction_at_double(const char *s, Py_ssize_t n, Py_ssize_t i) {
    static const char *words[] = {"cannot", "gimme", "gonna", "gotta", "lemme", "wanna"};
    if (i < 2) return 0;
    for (int k = 0; k < 6; k++)
        if (at_ci(s, n, i - 2, words[k], (Py_ssize_t)strlen(words[k]))) return 1;
    return 0;
}

static int contraction_at_quote(const char *s, Py_ssize_t n, Py_ssize_t i) {
    return (i >= 1 && at_ci(s, n, i - 1, "d'ye", 4)) || (i >= 4 && at_ci(s, n, i - 4, "more'n", 6))
           || at_ci(s, n, i, "'tis", 4) || at_ci(s, n, i, "'twas", 5);
}

/* Recently made short tokens, by a hash of their characters (direct-mapped: a new token takes
 * its slot). The same word gives the same str object again, which saves the allocation and
 * keeps its hash computed for the n-gram counting that follows. Only ever holds immutable str
 * objects, so sharing them is invisible to callers. */
#define CACHE_SLOTS 8192
#define CACHE_MAXLEN 24
static PyObject *cache[CACHE_SLOTS];

static PyObject *make(const char *p, Py_ssize_t len) {
    PyObject *u = PyUnicode_New(len, 127);
    if (u != NULL) memcpy(PyUnicode_1BYTE_DATA(u), p, (size_t)len);
    return u;
}

static PyObject *cached(const char *p, Py_ssize_t len) {
    if (len > CACHE_MAXLEN) return make(p, len);
    /* a hash of up to three 8-byte words (the last one zero-padded) */
    uint64_t h = (uint64_t)len * 0x9E3779B97F4A7C15ull;
    for (Py_ssize_t k = 0; k < len; k += 8) {
        uint64_t w = 0;
        memcpy(&w, p + k, (size_t)(len - k < 8 ? len - k : 8));
        h = (h ^ w) * 0xFF51AFD7ED558CCDull;
    }
    h ^= h >> 32;
    PyObject **slot = &cache[h & (CACHE_SLOTS - 1)];
    PyObject *u = *slot;
    if (u != NULL && PyUnicode_GET_LENGTH(u) == len && memcmp(PyUnicode_1BYTE_DATA(u), p, (size_t)len) == 0)
        return Py_NewRef(u);
    u = make(p, len);
    if (u != NULL) Py_XSETREF(*slot, Py_NewRef(u));
    return u;
}

static PyObject *slice(const char *s, Py_ssize_t a, Py_ssize_t b) {
    return cached(s + a, b - a);
}

static PyObject *lower_slice(const char *s, Py_ssize_t a, Py_ssize_t b) {
    char buf[CACHE_MAXLEN];
    if (b - a > CACHE_MAXLEN) {
        PyObject *u = PyUnicode_New(b - a, 127);
        if (u != NULL) {
            Py_UCS1 *d = PyUnicode_1BYTE_DATA(u);
            for (Py_ssize_t k = a; k < b; k++) d[k - a] = (Py_UCS1)lower(s[k]);
        }
        return u;
    }
    for (Py_ssize_t k = a; k < b; k++) buf[k - a] = lower(s[k]);
    return cached(buf, b - a);
}

static int load_params(void) {
    if (decide != NULL) return 0;
    if (loader == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "tokenize_native: configure() was not called");
        return -1;
    }
    PyObject *t = PyObject_CallNoArgs(loader);
    if (t == NULL) return -1;
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 3 || !PyAnySet_Check(PyTuple_GET_ITEM(t, 0))
        || !PyAnySet_Check(PyTuple_GET_ITEM(t, 1)) || !PyCallable_Check(PyTuple_GET_ITEM(t, 2))) {
        Py_DECREF(t);
        PyErr_SetString(PyExc_TypeError, "tokenize_native: loader() must give (set, set, callable)");
        return -1;
    }
    PyObject *firsts = PySet_New(NULL);
    if (firsts == NULL) { Py_DECREF(t); return -1; }
    PyObject *it = PyObject_GetIter(PyTuple_GET_ITEM(t, 1)), *pair;
    if (it == NULL) { Py_DECREF(firsts); Py_DECREF(t); return -1; }
    while ((pair = PyIter_Next(it)) != NULL) {
        int bad = !PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2 || PySet_Add(firsts, PyTuple_GET_ITEM(pair, 0)) < 0;
        Py_DECREF(pair);
        if (bad) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "tokenize_native: collocations must be pairs");
            Py_DECREF(it); Py_DECREF(firsts); Py_DECREF(t);
            return -1;
        }
    }
    Py_DECREF(it);
    if (PyErr_Occurred()) { Py_DECREF(firsts); Py_DECREF(t); return -1; }
    abbrevs = Py_NewRef(PyTuple_GET_ITEM(t, 0));
    collocs = Py_NewRef(PyTuple_GET_ITEM(t, 1));
    colloc_firsts = firsts;
    decide = Py_NewRef(PyTuple_GET_ITEM(t, 2));
    Py_DECREF(t);
    return 0;
}

/* punkt.py's _period_decision: does the period at `stop` end a sentence? The word before it is
 * s[start:stop]; the candidate's lookahead ends at `mend`; the next token is s[ns:mend] when
 * ns >= 0 (whitespace came between), none otherwise. 1 / 0, or -1 with an exception set. */
static int period_decision(const char *s, Py_ssize_t start, Py_ssize_t stop, Py_ssize_t ns, Py_ssize_t mend) {
    if (load_params() < 0) return -1;
    if (ns >= 0 && stop - start > 1) {
        int plain = 1, digits = 1;
        for (Py_ssize_t k = start; k < stop && plain; k++)
            if (!(cls[(unsigned char)s[k]] & C_ALPHA)) plain = 0;
        for (Py_ssize_t k = ns; k < mend && plain; k++) {
            if (!IS_ALNUM(s[k])) plain = 0;
            else if (!(cls[(unsigned char)s[k]] & C_DIGIT)) digits = 0;
        }
        for (Py_ssize_t k = stop + 1; k < ns && plain; k++)
            if (s[k] == '\n') plain = 0;
        if (plain) {
            PyObject *low = lower_slice(s, start, stop);
            if (low == NULL) return -1;
            int abbr = PySet_Contains(abbrevs, low);
            if (abbr < 0) { Py_DECREF(low); return -1; }
            if (!abbr) {
                int first = PySet_Contains(colloc_firsts, low);
                if (first <= 0) { Py_DECREF(low); return first < 0 ? -1 : 1; }
                PyObject *nxt = digits ? Py_NewRef(number_type) : lower_slice(s, ns, mend);
                if (nxt == NULL) { Py_DECREF(low); return -1; }
                PyObject *pair = PyTuple_Pack(2, low, nxt);
                Py_DECREF(low);
                Py_DECREF(nxt);
                if (pair == NULL) return -1;
                int colloc = PySet_Contains(collocs, pair);
                Py_DECREF(pair);
                return colloc < 0 ? -1 : !colloc;
            }
            Py_DECREF(low);
        }
    }
    PyObject *ctx = slice(s, start, mend);
    if (ctx == NULL) return -1;
    PyObject *r = PyObject_CallOneArg(decide, ctx);
    Py_DECREF(ctx);
    if (r == NULL) return -1;
    int yes = PyObject_IsTrue(r);
    Py_DECREF(r);
    return yes;
}

/* NLTK's _match_potential_end_contexts walk (punkt.py's _candidates): on_cand(state, s, start,
 * stop, ns, mend) for each candidate, in order: the end mark at `stop`, the word before it from
 * `start`, the lookahead to `mend`, its next token from `ns` (-1: none). */
typedef int (*cand_fn)(void *state, const char *s, Py_ssize_t start, Py_ssize_t stop, Py_ssize_t ns, Py_ssize_t mend);

static int walk_candidates(const char *s, Py_ssize_t n, cand_fn on_cand, void *state) {
    int have_prev = 0;
    Py_ssize_t prev_start = 0, prev_stop = 0, prev_ns = -1, prev_mend = 0;
    /* the text has no NUL (the scan declines control characters) and str data ends with one */
    for (Py_ssize_t i = (Py_ssize_t)strcspn(s, ".?!"); i < n; i += 1 + (Py_ssize_t)strcspn(s + i + 1, ".?!")) {
        /* NLTK's period context: [.?!] followed by a non-word mark, or by whitespace and a token */
        Py_ssize_t j = i + 1, ns = -1, mend;
        if (j >= n) continue;
        if (cls[(unsigned char)s[j]] & C_NONWORD) {
            mend = j + 1;
        } else if (IS_WS(s[j])) {
            Py_ssize_t k = j;
            while (k < n && IS_WS(s[k])) k++;
            if (k >= n) continue;
            ns = k;
            while (k < n && !IS_WS(s[k])) k++;
            mend = k;
        } else {
            continue;
        }
        /* the word before starts after the last whitespace since the previous candidate */
        Py_ssize_t last_ws = i - 1;
        while (last_ws > prev_stop && !IS_WS(s[last_ws])) last_ws--;
        Py_ssize_t idx = last_ws > prev_stop ? last_ws + 1 : prev_start;
        if (have_prev && prev_stop <= idx && on_cand(state, s, prev_start, prev_stop, prev_ns, prev_mend) < 0)
            return -1;
        have_prev = 1;
        prev_start = idx;
        prev_stop = i;
        prev_ns = ns;
        prev_mend = mend;
    }
    if (have_prev && on_cand(state, s, prev_start, prev_stop, prev_ns, prev_mend) < 0) return -1;
    return 0;
}

/* Token boundaries found by the sentence split, in increasing order (repeats allowed): a token
 * ends before each. A sentence-final period is a token of its own (a boundary before and after
 * it); with exact spans every sentence start is a boundary too (a sentence ending with a period
 * can be followed directly by ":5", which is one token, not a padded colon). */
struct cuts {
    Py_ssize_t *at;
    Py_ssize_t len;
};

#define CUTS_FOR(marks) (3 * ((marks) + 1) + 2)

/* punkt.py's period_breaks: each "." that ends a sentence (one ending an ellipsis is never
 * split off: NLTK's final-period rule needs a character other than "." before it). */
static int period_break(void *state, const char *s, Py_ssize_t start, Py_ssize_t stop, Py_ssize_t ns, Py_ssize_t mend) {
    struct cuts *cuts = state;
    if (s[stop] != '.' || (stop > 0 && s[stop - 1] == '.')) return 0;
    int d = period_decision(s, start, stop, ns, mend);
    if (d < 0) return -1;
    if (d) {
        cuts->at[cuts->len++] = stop;
        cuts->at[cuts->len++] = stop + 1;
    }
    return 0;
}

/* punkt.py's sentence_spans, first part: the slices between the sentence breaks. */
struct slices {
    Py_ssize_t *beg, *end;
    Py_ssize_t len, last_break;
};

static int sentence_break(void *state, const char *s, Py_ssize_t start, Py_ssize_t stop, Py_ssize_t ns, Py_ssize_t mend) {
    struct slices *sl = state;
    int d;
    if (s[stop] == '.') {
        d = period_decision(s, start, stop, ns, mend);
    } else {
        if (load_params() < 0) return -1;
        PyObject *ctx = slice(s, start, mend);
        if (ctx == NULL) return -1;
        PyObject *r = PyObject_CallOneArg(decide, ctx);
        Py_DECREF(ctx);
        if (r == NULL) return -1;
        d = PyObject_IsTrue(r);
        Py_DECREF(r);
    }
    if (d < 0) return -1;
    if (d) {
        sl->beg[sl->len] = sl->last_break;
        sl->end[sl->len++] = stop + 1;
        sl->last_break = ns >= 0 ? ns : stop + 1;
    }
    return 0;
}

/* Punkt's boundary realignment: closing quotes/brackets at the start of s[a:b] followed by
 * whitespace, "--" or the end (["')\]}]+?(?:\s+|(?=--)|$)); how many closers (0: no match) and,
 * in *len, the length of the match. */
static Py_ssize_t realign_match(const char *s, Py_ssize_t a, Py_ssize_t b, Py_ssize_t *len) {
    Py_ssize_t k = a;
    while (k < b && strchr("\"')]}", s[k]) != NULL && s[k] != '\0') {
        k++;
        if (k < b && IS_WS(s[k])) {
            Py_ssize_t w = k;
            while (w < b && IS_WS(s[w])) w++;
            *len = w - a;
            return k - a;
        }
        if ((k + 1 < b && s[k] == '-' && s[k + 1] == '-') || k == b) {
            *len = k - a;
            return k - a;
        }
    }
    return 0;
}

/* word_tokenize.py's _fast_tokens with double quotes (or closing brackets and newlines/tabs): the
 * exact sentence spans give which double quotes open (``) and which periods are split off.
 * Fills cuts (sorted) and opening[i] for each '"'. */
static int span_cuts(const char *s, Py_ssize_t n, Py_ssize_t marks, struct cuts *cuts, unsigned char *opening) {
    Py_ssize_t buf[4 * 33], *mem = buf;
    if (marks + 1 > 32) {
        mem = PyMem_New(Py_ssize_t, 4 * (marks + 1));
        if (mem == NULL) { PyErr_NoMemory(); return -1; }
    }
    struct slices sl = {mem, mem + (marks + 1), 0, 0};
    Py_ssize_t *ob = mem + 2 * (marks + 1), *oe = mem + 3 * (marks + 1), no = 0;
    int rc = -1;
    if (walk_candidates(s, n, sentence_break, &sl) < 0) goto out;
    Py_ssize_t e = n;
    while (e > 0 && IS_WS(s[e - 1])) e--;
    sl.beg[sl.len] = sl.last_break;
    sl.end[sl.len++] = e;
    /* realignment */
    Py_ssize_t realign = 0;
    for (Py_ssize_t k = 0; k < sl.len; k++) {
        Py_ssize_t b1 = sl.beg[k] + realign, e1 = sl.end[k], mlen = 0, nclose;
        if (k == sl.len - 1) {
            if (b1 < e1) { ob[no] = b1; oe[no++] = e1; }
            continue;
        }
        nclose = realign_match(s, sl.beg[k + 1], sl.end[k + 1], &mlen);
        if (nclose > 0) {
            ob[no] = b1;
            oe[no++] = sl.beg[k + 1] + nclose;
            realign = mlen;
        } else {
            realign = 0;
            if (b1 < e1) { ob[no] = b1; oe[no++] = e1; }
        }
    }
    /* double quotes: `` at a sentence start, after a space or an opening bracket, or right after
     * a sentence-initial one; '' otherwise */
    Py_ssize_t q = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s[i] != '"') continue;
        while (q < no && ob[q] < i - 1) q++;
        int start_here = 0, start_before = 0;
        for (Py_ssize_t r = q; r < no && ob[r] <= i; r++) {
            if (ob[r] == i) start_here = 1;
            if (ob[r] == i - 1) start_before = 1;
        }
        opening[i] = start_here || (i > 0 && (strchr(" ([{<", s[i - 1]) != NULL || (start_before && s[i - 1] == '"')));
    }
    /* the final period of each sentence, behind closing brackets, closing quotes and spaces */
    for (Py_ssize_t k = 0; k < no; k++) {
        Py_ssize_t b = ob[k], x = oe[k];
        cuts->at[cuts->len++] = b;
        while (x > b && strchr(" ])}>\"", s[x - 1]) != NULL && s[x - 1] != '\0' && !(s[x - 1] == '"' && opening[x - 1]))
            x--;
        if (x - b >= 2 && s[x - 1] == '.') {
            cuts->at[cuts->len++] = x - 1;
            cuts->at[cuts->len++] = x;
        }
    }
    rc = 0;
out:
    if (mem != buf) PyMem_Free(mem);
    return rc;
}

/* The tokens made so far (room for one per character of the text: tokens never overlap). */
struct toks {
    PyObject **items;
    Py_ssize_t len;
};

static inline int add(struct toks *out, const char *s, Py_ssize_t a, Py_ssize_t b) {
    PyObject *t = slice(s, a, b);
    if (t == NULL) return -1;
    out->items[out->len++] = t;
    return 0;
}

/* The second clitic rule on a token: a cut before 'll 're 've (either case) and n't / N'T. */
#define F_APOS 1   /* the text has apostrophes: the clitic rules */
#define F_CONTR 2  /* the text may have a MacIntyre contraction */
#define IS_W(c) (IS_ALNUM(c) || (c) == '_')

/* NLTK's MacIntyre contractions without a leading apostrophe ((?i)\b(can)(not)\b and the like;
 * "wanna" must be followed by whitespace, i.e. end the token): where to cut each. */
static const struct { const char *word; Py_ssize_t len, cut; int at_end; } contractions[] = {
    {"cannot", 6, 3, 0}, {"d'ye", 4, 1, 0}, {"gimme", 5, 3, 0}, {"gonna", 5, 3, 0},
    {"gotta", 5, 3, 0},  {"lemme", 5, 3, 0}, {"more'n", 6, 4, 0}, {"wanna", 5, 3, 1},
};

/* A token s[a:b] after the clitic rules; with F_CONTR, the contraction rules split it where a
 * contraction stands between word boundaries (token edges are boundaries: spaces in NLTK's text). */
static int add_piece(struct toks *out, const char *s, Py_ssize_t a, Py_ssize_t b, int flags) {
    if (!(flags & F_CONTR)) return add(out, s, a, b);
    Py_ssize_t last = a;
    for (Py_ssize_t p = a; p < b; p++) {
        if (p > a && IS_W(s[p - 1])) continue;
        char c = lower(s[p]);
        for (size_t k = 0; k < sizeof contractions / sizeof contractions[0]; k++) {
            Py_ssize_t len = contractions[k].len, q = p + len;
            if (contractions[k].word[0] != c || !at_ci(s, b, p, contractions[k].word, len)) continue;
            if (contractions[k].at_end ? q != b : (q < b && IS_W(s[q]))) continue;
            if (p > last && add(out, s, last, p) < 0) return -1;
            if (add(out, s, p, p + contractions[k].cut) < 0) return -1;
            if (add(out, s, p + contractions[k].cut, q) < 0) return -1;
            last = q;
            p = q - 1;
            break;
        }
    }
    return last < b ? add(out, s, last, b) : 0;
}

/* The second clitic rule on a token: a cut before 'll 're 've (either case) and n't / N'T. */
static int add_clitic2(struct toks *out, const char *s, Py_ssize_t a, Py_ssize_t b, int flags) {
    if (b - a >= 4 && s[b - 4] != '\'' && !IS_WS(s[b - 4])) {
        const char *e = s + b - 3;
        if (e[0] == '\'' && ((e[1] == 'l' && e[2] == 'l') || (e[1] == 'L' && e[2] == 'L')
                             || (e[1] == 'r' && e[2] == 'e') || (e[1] == 'R' && e[2] == 'E')
                             || (e[1] == 'v' && e[2] == 'e') || (e[1] == 'V' && e[2] == 'E'))) {
            if (add_piece(out, s, a, b - 3, flags) < 0) return -1;
            return add_piece(out, s, b - 3, b, flags);
        }
        if ((e[0] == 'n' && e[1] == '\'' && e[2] == 't') || (e[0] == 'N' && e[1] == '\'' && e[2] == 'T')) {
            if (add_piece(out, s, a, b - 3, flags) < 0) return -1;
            return add_piece(out, s, b - 3, b, flags);
        }
    }
    return add_piece(out, s, a, b, flags);
}

/* A token s[a:b] (b > a); with apostrophes in the text, the clitic rules; then the contractions. */
static int add_token(struct toks *out, const char *s, Py_ssize_t a, Py_ssize_t b, int flags) {
    if (!(flags & F_APOS)) return add_piece(out, s, a, b, flags);
    if (b - a >= 3 && s[b - 2] == '\'' && s[b - 3] != '\'' && !IS_WS(s[b - 3]) && strchr("sSmMdD", s[b - 1])) {
        if (add_clitic2(out, s, a, b - 2, flags) < 0) return -1;
        return add_piece(out, s, b - 2, b, flags);
    }
    return add_clitic2(out, s, a, b, flags);
}

static PyObject *tokenize(PyObject *self, PyObject *arg) {
    (void)self;
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "tokenize() needs a str");
        return NULL;
    }
    if (!PyUnicode_IS_ASCII(arg)) Py_RETURN_NONE;
    const char *s = (const char *)PyUnicode_1BYTE_DATA(arg);
    Py_ssize_t n = PyUnicode_GET_LENGTH(arg);

    /* which path, and can this file take it? */
    int special = 0, apos = 0, other_ws = 0, closer = 0, quote = 0, ellipsis = 0, contr = 0;
    Py_ssize_t marks = 0; /* . ? ! */
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        unsigned char k = cls[c];
        if (k & (C_ALPHA | C_DIGIT | C_SPACE)) {
            if ((k & C_NMT) && i + 1 < n && (s[i + 1] | 0x20) == (c | 0x20) && contraction_at_double(s, n, i))
                contr = 1;
            continue;
        }
        if (!(k & (C_WS | C_PAD | C_OTHER))) Py_RETURN_NONE; /* ` and control characters */
        special = 1;
        if (k & C_WS) { other_ws = 1; continue; }
        switch (c) {
        case '.':
            if (i + 1 < n && s[i + 1] == '.') ellipsis = 1;
            marks++;
            break;
        case '?':
        case '!':
            marks++;
            break;
        case '"':
            quote = 1;
            break;
        case ',':
        case ':':
            if (i + 1 < n && (s[i + 1] == ',' || s[i + 1] == ':')) Py_RETURN_NONE;
            break;
        case '\'':
            if (i == 0 || i + 1 >= n || !IS_ALNUM(s[i - 1]) || !IS_ALNUM(s[i + 1])) Py_RETURN_NONE;
            if (contraction_at_quote(s, n, i)) {
                /* 'tis and 'twas need a space before the apostrophe: declined */
                if (!(i + 1 < n && (s[i + 1] | 0x20) == 't')) contr = 1;
                else Py_RETURN_NONE;
            }
            apos = 1;
            break;
        case ')':
        case ']':
        case '}':
            closer = 1;
            break;
        }
    }
    /* exact sentence spans needed (double quotes; Punkt's realignment can move a closing
     * bracket behind a newline or tab into the sentence before): no ellipses there */
    int spans = quote || (other_ws && closer);
    if (spans && ellipsis) Py_RETURN_NONE;

    Py_ssize_t cut_buf[CUTS_FOR(31)];
    struct cuts cuts = {cut_buf, 0};
    unsigned char open_buf[256], *opening = open_buf;
    PyObject *item_buf[256], *list = NULL;
    struct toks toks = {item_buf, 0}, *out = &toks;
    if (n > 256) {
        toks.items = PyMem_New(PyObject *, n);
        if (toks.items == NULL) return PyErr_NoMemory();
    }
    int flags = (apos ? F_APOS : 0) | (contr ? F_CONTR : 0);
    if (!special) {
        /* words and spaces only */
        Py_ssize_t a = -1;
        for (Py_ssize_t i = 0; i <= n; i++) {
            if (i == n || s[i] == ' ') {
                if (a >= 0 && add_piece(out, s, a, i, flags) < 0) goto fail;
                a = -1;
            } else if (a < 0) {
                a = i;
            }
        }
        goto done;
    }

    if (marks > 31) {
        cuts.at = PyMem_New(Py_ssize_t, CUTS_FOR(marks));
        if (cuts.at == NULL) { PyErr_NoMemory(); goto fail; }
    }
    if (spans) {
        if (n > 256) {
            opening = PyMem_Malloc((size_t)n);
            if (opening == NULL) { PyErr_NoMemory(); goto fail; }
        }
        if (span_cuts(s, n, marks, &cuts, opening) < 0) goto fail;
    } else if (marks) {
        if (walk_candidates(s, n, period_break, &cuts) < 0) goto fail;
        /* a text-final period, behind trailing whitespace then closing brackets and spaces */
        Py_ssize_t e = n;
        while (e > 0 && IS_WS(s[e - 1])) e--;
        while (e > 0 && strchr(" ])}>", s[e - 1]) != NULL) e--;
        if (e > 0 && s[e - 1] == '.' && !(e > 1 && s[e - 2] == '.')) {
            cuts.at[cuts.len++] = e - 1;
            cuts.at[cuts.len++] = e;
        }
    }

    Py_ssize_t a = -1, next_cut = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (next_cut < cuts.len && cuts.at[next_cut] <= i) {
            int here = 0;
            for (; next_cut < cuts.len && cuts.at[next_cut] <= i; next_cut++) here |= cuts.at[next_cut] == i;
            if (here) {
                if (a >= 0 && add_token(out, s, a, i, flags) < 0) goto fail;
                a = -1;
            }
        }
        unsigned char c = (unsigned char)s[i];
        unsigned char k = cls[c];
        if (k & (C_SPACE | C_WS)) {
            if (a >= 0 && add_token(out, s, a, i, flags) < 0) goto fail;
            a = -1;
        } else if ((k & C_PAD) && !((c == ',' || c == ':') && i + 1 < n && (cls[(unsigned char)s[i + 1]] & C_DIGIT))) {
            /* (NLTK pads a comma or colon only where no digit follows: 1,000 and 10:30 stay whole) */
            if (a >= 0 && add_token(out, s, a, i, flags) < 0) goto fail;
            if (add(out, s, i, i + 1) < 0) goto fail;
            a = -1;
        } else if (c == '"') {
            if (a >= 0 && add_token(out, s, a, i, flags) < 0) goto fail;
            out->items[out->len++] = Py_NewRef(opening[i] ? open_quote : close_quote);
            a = -1;
        } else if (c == '.' && i + 1 < n && s[i + 1] == '.') {
            /* an ellipsis (two or more periods) is a token of its own */
            Py_ssize_t j = i + 2;
            while (j < n && s[j] == '.') j++;
            if (a >= 0 && add_token(out, s, a, i, flags) < 0) goto fail;
            if (add(out, s, i, j) < 0) goto fail;
            a = -1;
            i = j - 1;
        } else if (c == '-' && i + 1 < n && s[i + 1] == '-') {
            if (a >= 0 && add_token(out, s, a, i, flags) < 0) goto fail;
            if (add(out, s, i, i + 2) < 0) goto fail;
            a = -1;
            i++;
        } else if (a < 0) {
            a = i;
        }
    }
    if (a >= 0 && add_token(out, s, a, n, flags) < 0) goto fail;
done:
    list = PyList_New(toks.len);
    if (list == NULL) goto fail;
    if (toks.len > 0)
        memcpy(((PyListObject *)list)->ob_item, toks.items, (size_t)toks.len * sizeof(PyObject *));
    toks.len = 0; /* the list owns them now */
fail:
    for (Py_ssize_t k = 0; k < toks.len; k++) Py_DECREF(toks.items[k]);
    if (toks.items != item_buf) PyMem_Free(toks.items);
    if (cuts.at != cut_buf) PyMem_Free(cuts.at);
    if (opening != open_buf) PyMem_Free(opening);
    return list;
}

static PyObject *configure(PyObject *self, PyObject *arg) {
    (void)self;
    if (!PyCallable_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "configure() needs a callable");
        return NULL;
    }
    Py_XSETREF(loader, Py_NewRef(arg));
    Py_CLEAR(abbrevs);
    Py_CLEAR(collocs);
    Py_CLEAR(decide);
    Py_CLEAR(colloc_firsts);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"tokenize", tokenize, METH_O,
     "tokenize(text) -> list of str, or None: word_tokenize(text) for the ASCII texts this module\n"
     "decides exactly (None for the others: use the Python path)."},
    {"configure", configure, METH_O,
     "configure(loader): loader() -> (abbreviations, collocations, decide), Punkt's English\n"
     "parameters and the decision for a period context; called once, when first needed."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "tokenize_native",
    "NLTK-equal word tokens for ASCII prose (compiled twin of word_tokenize.py's whole-text path).",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit_tokenize_native(void) {
    init_classes();
    if (number_type == NULL) {
        number_type = PyUnicode_InternFromString("##number##");
        open_quote = PyUnicode_InternFromString("``");
        close_quote = PyUnicode_InternFromString("''");
        if (number_type == NULL || open_quote == NULL || close_quote == NULL) return NULL;
    }
    return PyModule_Create(&module);
}
