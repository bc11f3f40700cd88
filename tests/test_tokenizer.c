/* The GPT-2 tokenizer's own checks, no device and no Python (tests/tokenizer_vs_hf.py holds
 * it against Hugging Face `tokenizers`): decode(encode(text)) gives the text back for
 * random valid UTF-8, the merges fire (fewer ids than bytes), the count is right when the
 * output buffer is short, hub-cache repo ids resolve, and each malformed input is refused
 * with a message naming it. */
#include <stdint.h>

#include "base/fileio.h"
#include "common/testutil.h"

static char *dir;

/* the 256 one-byte symbols of byte-level BPE, as tokenizer.json writes them */
static void symbol_of(int b, char *out)
{
    int printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    unsigned c = (unsigned)b;
    if (!printable) {
        c = 0x100;
        for (int x = 0; x < b; x++) c += !((x >= 0x21 && x <= 0x7e) || (x >= 0xa1 && x <= 0xac) || (x >= 0xae && x <= 0xff));
    }
    if (c < 0x80) snprintf(out, 8, "%s%c", c == '"' || c == '\\' ? "\\" : "", (char)c);
    else snprintf(out, 8, "%c%c", (char)(0xc0 | c >> 6), (char)(0x80 | (c & 0x3f)));
}

/* tokenizer.json with the byte symbols, merges "Ġ t", "Ġt h", "e r" and the extra text
 * `extra_merges` (",\"x y\"" style), and an added token <|endoftext|> */
static void write_tokenizer(const char *d, const char *extra_merges, const char *extra_vocab)
{
    char *buf = malloc(1 << 16), sym[8];
    size_t n = (size_t)snprintf(buf, 1 << 16, "{\"version\": \"1.0\", \"added_tokens\": [{\"id\": 259, \"content\": "
                                              "\"<|endoftext|>\", \"special\": true}], \"pre_tokenizer\": {\"type\": "
                                              "\"ByteLevel\", \"add_prefix_space\": false}, \"model\": {\"type\": \"BPE\", "
                                              "\"vocab\": {");
    for (int b = 0; b < 256; b++) {
        symbol_of(b, sym);
        n += (size_t)snprintf(buf + n, (1 << 16) - n, "\"%s\": %d, ", sym, b);
    }
    n += (size_t)snprintf(buf + n, (1 << 16) - n,
                          "\"\xc4\xa0t\": 256, \"\xc4\xa0th\": 257, \"er\": 258, \"<|endoftext|>\": 259%s}, "
                          "\"merges\": [\"\xc4\xa0 t\", \"\xc4\xa0t h\", \"e r\"%s]}}",
                          extra_vocab, extra_merges);
    char path[512];
    snprintf(path, sizeof path, "%s/tokenizer.json", d);
    tu_write_file(path, buf, n);
    free(buf);
}

static int setup(void **state)
{
    (void)state;
    dir = tu_mkdtemp("tokenizer");
    write_tokenizer(dir, "", "");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_rm_rf(dir);
    free(dir);
    return 0;
}

static size_t encode_decode(const tdacl_tokenizer *t, const char *text, size_t len, char *back, int64_t *count)
{
    int64_t n;
    assert_ok(NULL, tdacl_tokenizer_encode(t, text, len, NULL, 0, &n));
    int32_t *ids = malloc((size_t)(n ? n : 1) * sizeof *ids);
    assert_ok(NULL, tdacl_tokenizer_encode(t, text, len, ids, n, &n));
    size_t blen;
    assert_ok(NULL, tdacl_tokenizer_decode(t, ids, n, back, len + 1, &blen));
    free(ids);
    *count = n;
    return blen;
}

/* random valid UTF-8: ASCII, spaces, 2-, 3- and 4-byte characters */
static size_t random_utf8(uint64_t *s, char *out, size_t max_chars)
{
    size_t n = 0, chars = (size_t)(*s >> 33) % max_chars;
    for (size_t i = 0; i < chars; i++) {
        *s = *s * 6364136223846793005ull + 1442695040888963407ull;
        unsigned r = (unsigned)(*s >> 33);
        unsigned c = r % 5 == 0 ? (unsigned)" \t\n'"[r % 4] : r % 5 == 1 ? 0x20 + r % 95 : r % 5 == 2 ? 0x80 + r % 0x780
                     : r % 5 == 3 ? 0x800 + r % 0xd000 : 0x10000 + r % 0x1000;
        if (c < 0x80) out[n++] = (char)c;
        else if (c < 0x800) out[n++] = (char)(0xc0 | c >> 6), out[n++] = (char)(0x80 | (c & 0x3f));
        else if (c < 0x10000)
            out[n++] = (char)(0xe0 | c >> 12), out[n++] = (char)(0x80 | (c >> 6 & 0x3f)), out[n++] = (char)(0x80 | (c & 0x3f));
        else
            out[n++] = (char)(0xf0 | c >> 18), out[n++] = (char)(0x80 | (c >> 12 & 0x3f)),
            out[n++] = (char)(0x80 | (c >> 6 & 0x3f)), out[n++] = (char)(0x80 | (c & 0x3f));
    }
    return n;
}

static void test_round_trip(void **state)
{
    (void)state;
    tdacl_tokenizer *t;
    assert_ok(NULL, tdacl_tokenizer_load(dir, &t));
    int32_t size;
    assert_ok(NULL, tdacl_tokenizer_vocab_size(t, &size));
    assert_int_equal(size, 260);
    uint64_t s = 12345;
    char text[512], back[513];
    for (int k = 0; k < 500; k++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        size_t len = random_utf8(&s, text, 100);
        int64_t count;
        size_t blen = encode_decode(t, text, len, back, &count);
        assert_int_equal(blen, len);
        assert_memory_equal(back, text, len);
    }
    /* merges fire, lowest rank first: " the" is Ġth e, " other" Ġ o t h er: 7 ids for 10 bytes */
    int64_t count;
    size_t blen = encode_decode(t, " the other", 10, back, &count);
    assert_int_equal(blen, 10);
    assert_int_equal(count, 7);
    /* the added token is cut out whole, in the middle of a word too */
    const char *special = "a<|endoftext|>b";
    int32_t ids[8];
    assert_ok(NULL, tdacl_tokenizer_encode(t, special, strlen(special), ids, 8, &count));
    assert_int_equal(count, 3);
    assert_int_equal(ids[1], 259);
    /* a short buffer gets the first ids, the count is the whole */
    int32_t two[2] = {-7, -7};
    assert_ok(NULL, tdacl_tokenizer_encode(t, " the other", 10, two, 1, &count));
    assert_int_equal(count, 7);
    assert_int_equal(two[1], -7);
    tdacl_tokenizer_destroy(t);
}

static void test_bad_input(void **state)
{
    (void)state;
    tdacl_tokenizer *t;
    assert_ok(NULL, tdacl_tokenizer_load(dir, &t));
    int64_t count;
    assert_status(NULL, tdacl_tokenizer_encode(t, "ok\xc3(", 4, NULL, 0, &count), TDACL_ERR_FORMAT);
    assert_contains(tdacl_last_error(NULL), "not valid UTF-8 (byte 2)");
    int32_t bad = 260;
    size_t len;
    assert_status(NULL, tdacl_tokenizer_decode(t, &bad, 1, NULL, 0, &len), TDACL_ERR_INVALID_ARGUMENT);
    assert_contains(tdacl_last_error(NULL), "ids[0] = 260 is not a token id");
    assert_status(NULL, tdacl_tokenizer_encode(t, NULL, 3, NULL, 0, &count), TDACL_ERR_INVALID_ARGUMENT);
    tdacl_tokenizer_destroy(t);

    char sub[600];
    snprintf(sub, sizeof sub, "%s/missing", dir);
    assert_status(NULL, tdacl_tokenizer_load(sub, &t), TDACL_ERR_IO);
    assert_contains(tdacl_last_error(NULL), "no tokenizer.json and no vocab.json + merges.txt");
    assert_null(t);

    /* a merge naming a token the vocabulary lacks */
    snprintf(sub, sizeof sub, "%s/badmerge", dir);
    assert_int_equal(tdacl__mkdir_p(sub, 0700), 0);
    write_tokenizer(sub, ", \"q zz\"", "");
    assert_status(NULL, tdacl_tokenizer_load(sub, &t), TDACL_ERR_FORMAT);
    assert_contains(tdacl_last_error(NULL), "merge 3 (\"q\" \"zz\") names a token missing from the vocabulary");
    /* two tokens with one id */
    snprintf(sub, sizeof sub, "%s/dupid", dir);
    assert_int_equal(tdacl__mkdir_p(sub, 0700), 0);
    write_tokenizer(sub, "", ", \"again\": 5");
    assert_status(NULL, tdacl_tokenizer_load(sub, &t), TDACL_ERR_FORMAT);
    assert_contains(tdacl_last_error(NULL), "id 5 is given to two tokens");
    /* not JSON */
    snprintf(sub, sizeof sub, "%s/notjson", dir);
    assert_int_equal(tdacl__mkdir_p(sub, 0700), 0);
    char path[700];
    snprintf(path, sizeof path, "%s/tokenizer.json", sub);
    tu_write_file(path, "{\"model\": ", 10);
    assert_status(NULL, tdacl_tokenizer_load(sub, &t), TDACL_ERR_FORMAT);
    assert_contains(tdacl_last_error(NULL), "tokenizer.json");
    /* merges.txt with a malformed line */
    snprintf(sub, sizeof sub, "%s/files", dir);
    assert_int_equal(tdacl__mkdir_p(sub, 0700), 0);
    snprintf(path, sizeof path, "%s/vocab.json", sub);
    const char *vocab = "{\"a\": 0, \"b\": 1, \"ab\": 2}", *merges = "#version: 0.2\na b\nab\n";
    tu_write_file(path, vocab, strlen(vocab));
    snprintf(path, sizeof path, "%s/merges.txt", sub);
    tu_write_file(path, merges, strlen(merges));
    assert_status(NULL, tdacl_tokenizer_load(sub, &t), TDACL_ERR_FORMAT);
    assert_contains(tdacl_last_error(NULL), "merges.txt:3: \"ab\" is not two tokens");
}

/* "org/name" resolves to the snapshot refs/main names under $HF_HOME/hub, offline */
static void test_hub_cache(void **state)
{
    (void)state;
    char p[700];
    snprintf(p, sizeof p, "%s/hf/hub/models--org--tiny/snapshots/abc123", dir);
    assert_int_equal(tdacl__mkdir_p(p, 0700), 0);
    write_tokenizer(p, "", "");
    snprintf(p, sizeof p, "%s/hf/hub/models--org--tiny/refs", dir);
    assert_int_equal(tdacl__mkdir_p(p, 0700), 0);
    snprintf(p, sizeof p, "%s/hf/hub/models--org--tiny/refs/main", dir);
    tu_write_file(p, "abc123\n", 7);
    snprintf(p, sizeof p, "%s/hf", dir);
    setenv("HF_HOME", p, 1);
    unsetenv("HF_HUB_CACHE");
    tdacl_tokenizer *t;
    assert_ok(NULL, tdacl_tokenizer_load("org/tiny", &t));
    tdacl_tokenizer_destroy(t);
    assert_status(NULL, tdacl_tokenizer_load("org/absent", &t), TDACL_ERR_IO);
    assert_contains(tdacl_last_error(NULL), "models--org--absent/snapshots; nothing is downloaded");
    unsetenv("HF_HOME");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_hub_cache),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
