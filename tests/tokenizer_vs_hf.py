#!/usr/bin/env python3
"""libtdacl's GPT-2 tokenizer against Hugging Face `tokenizers` (PyPI).

Trains a small byte-level BPE on generated text (no download), saves it as tokenizer.json
and as vocab.json + merges.txt, then encodes a corpus with Unicode letters and numbers of
several scripts, emoji, whitespace runs of every kind, digits, contractions and the special
token, plus random strings, with both; ids and decoded text must be identical.  Also runs
`tdacl tokenize` once each way.

usage: tokenizer_vs_hf.py LIBTDACL TDACL_CLI WORKDIR
"""
import ctypes
import os
import random
import shutil
import subprocess
import sys

try:
    from tokenizers import ByteLevelBPETokenizer, Tokenizer
except ImportError:
    sys.exit("tokenizer_vs_hf.py: the `tokenizers` package is missing "
             "(tools/run-tests.sh installs it into .venv-test from tools/requirements-test.txt)")

LIB, CLI, WORK = sys.argv[1], sys.argv[2], sys.argv[3]

# code-point ranges assigned since Unicode 6 or earlier, so the Unicode tables of Python's
# unicodedata (our generator) and of the regex engine under `tokenizers` agree on them
RANGES = [(0x20, 0x7E), (0xA0, 0x17F), (0x370, 0x3FF), (0x400, 0x4FF), (0x5D0, 0x5EA), (0x620, 0x669),
          (0x900, 0x97F), (0x3040, 0x30FF), (0x4E00, 0x4E80), (0xAC00, 0xAC40), (0x2000, 0x206F),
          (0x2150, 0x218F), (0x2460, 0x24FF), (0x1F600, 0x1F64F), (0x1D400, 0x1D44F)]
SPACES = " \t\n\r\x0b\x0c\x85\xa0\u1680\u2000\u2009\u200a\u2028\u2029\u202f\u205f\u3000"


def random_text(rng, n):
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.25:
            out.append(rng.choice(SPACES))
        elif r < 0.35:
            out.append(rng.choice(["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'x", "''"]))
        else:
            a, b = rng.choice(RANGES)
            out.append(chr(rng.randint(a, b)))
    return "".join(out)


def corpus(rng):
    fixed = [
        "", " ", "  ", "\n", "\n\n", " \n ", "\t\tx", "a  b", "a\n\nb", "trailing   ", "   leading",
        "Hello world! It's a test, isn't it? We'll see; they've gone, I'm here, you'd know.",
        "IT'S LOUD'S 'S", "don't'dont '' 's",
        "Numbers: 1234567890 3.14159 -42 1,000,000 ٣٤٥ ²³ Ⅻ ①②",
        "Ελληνικά κείμενα και Кириллица тоже, עברית, العربية, हिन्दी",
        "日本語のテキストと中文文本、한국어",
        "emoji 😀😃😄 mixed🎉text 👍🏽 and ZWJ 👩‍👩‍👧",
        "combining: e\u0301 a\u0308 n\u0303",
        "math 𝐀𝐁𝐂 𝑥+𝑦",
        "tabs\tand\u00a0nbsp\u3000ideographic\u2028line sep",
        "<|endoftext|>", "before<|endoftext|>after", "a <|endoftext|> b<|endoftext|><|endoftext|>",
        "x" * 300, "ab" * 150 + " " + "1" * 50,
        "mixed123abc!!!???...   \n\t  end",
    ]
    return fixed + [random_text(rng, rng.randint(0, 40)) for _ in range(300)]


class Lib:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        L = self.lib
        L.tdacl_tokenizer_load.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
        L.tdacl_tokenizer_destroy.argtypes = [ctypes.c_void_p]
        L.tdacl_tokenizer_encode.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t,
                                             ctypes.POINTER(ctypes.c_int32), ctypes.c_int64,
                                             ctypes.POINTER(ctypes.c_int64)]
        L.tdacl_tokenizer_decode.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int32), ctypes.c_int64,
                                             ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]
        L.tdacl_last_error.restype = ctypes.c_char_p
        L.tdacl_last_error.argtypes = [ctypes.c_void_p]

    def check(self, st, what):
        if st:
            raise RuntimeError("%s: status %d: %s" % (what, st, self.lib.tdacl_last_error(None).decode()))

    def load(self, d):
        h = ctypes.c_void_p()
        self.check(self.lib.tdacl_tokenizer_load(d.encode(), ctypes.byref(h)), "load " + d)
        return h

    def encode(self, h, text):
        b = text.encode()
        n = ctypes.c_int64()
        self.check(self.lib.tdacl_tokenizer_encode(h, b, len(b), None, 0, ctypes.byref(n)), "encode")
        ids = (ctypes.c_int32 * max(n.value, 1))()
        self.check(self.lib.tdacl_tokenizer_encode(h, b, len(b), ids, n.value, ctypes.byref(n)), "encode")
        return list(ids[:n.value])

    def decode(self, h, ids):
        arr = (ctypes.c_int32 * max(len(ids), 1))(*ids)
        n = ctypes.c_size_t()
        self.check(self.lib.tdacl_tokenizer_decode(h, arr, len(ids), None, 0, ctypes.byref(n)), "decode")
        buf = ctypes.create_string_buffer(n.value + 1)
        self.check(self.lib.tdacl_tokenizer_decode(h, arr, len(ids), buf, n.value + 1, ctypes.byref(n)), "decode")
        return buf.raw[:n.value].decode()


def main():
    rng = random.Random(7)
    shutil.rmtree(WORK, ignore_errors=True)
    json_dir, files_dir = os.path.join(WORK, "json"), os.path.join(WORK, "files")
    os.makedirs(json_dir), os.makedirs(files_dir)
    train = [random_text(rng, rng.randint(5, 60)) for _ in range(3000)]
    train += ["the quick brown fox jumps over the lazy dog's back, isn't it? 12345 67890"] * 50
    hf = ByteLevelBPETokenizer()
    hf.train_from_iterator(train, vocab_size=900, min_frequency=2, special_tokens=["<|endoftext|>"])
    hf.save(os.path.join(json_dir, "tokenizer.json"))
    hf.save_model(files_dir)
    hf_json = Tokenizer.from_file(os.path.join(json_dir, "tokenizer.json"))
    hf_files = ByteLevelBPETokenizer(os.path.join(files_dir, "vocab.json"), os.path.join(files_dir, "merges.txt"))

    lib = Lib(LIB)
    failures = 0
    texts = corpus(rng)
    for name, d, ref, with_special in (("tokenizer.json", json_dir, hf_json, True),
                                       ("vocab.json + merges.txt", files_dir, hf_files, False)):
        h = lib.load(d)
        checked = 0
        for t in texts:
            if not with_special and "<|endoftext|>" in t:
                continue
            want = ref.encode(t).ids
            got = lib.encode(h, t)
            if got != want:
                failures += 1
                if failures <= 10:
                    print("MISMATCH (%s) %r\n  ours %s\n  hf   %s" % (name, t, got, want))
                continue
            back = lib.decode(h, got)
            if back != t or back != ref.decode(want, skip_special_tokens=False):
                failures += 1
                print("DECODE MISMATCH (%s) %r -> %r (hf %r)" % (name, t, back, ref.decode(want)))
            checked += 1
        lib.lib.tdacl_tokenizer_destroy(h)
        print("%s: %d texts identical to tokenizers %s" % (name, checked, __import__("tokenizers").__version__))

    # invalid UTF-8 is refused with a message naming the byte
    h = lib.load(json_dir)
    try:
        lib.encode(h, "ok")
        b = b"ab\xff"
        n = ctypes.c_int64()
        st = lib.lib.tdacl_tokenizer_encode(h, b, len(b), None, 0, ctypes.byref(n))
        msg = lib.lib.tdacl_last_error(None).decode()
        if st == 0 or "byte 2" not in msg:
            failures += 1
            print("invalid UTF-8: status %d, message %r" % (st, msg))
    finally:
        lib.lib.tdacl_tokenizer_destroy(h)

    # the command line, both ways
    text = "Hello world, it's 2026! 😀"
    ids = subprocess.run([CLI, "tokenize", "--model", json_dir, "--text", text], check=True, capture_output=True,
                         text=True).stdout.strip()
    if ids != ",".join(map(str, hf_json.encode(text).ids)):
        failures += 1
        print("tdacl tokenize --text: %s, want %s" % (ids, hf_json.encode(text).ids))
    back = subprocess.run([CLI, "tokenize", "--model", json_dir, "--ids", ids], check=True, capture_output=True,
                          text=True).stdout
    if back != text + "\n":
        failures += 1
        print("tdacl tokenize --ids: %r" % back)
    # text to text: a checkpoint with the tokenizer beside it; greedy `generate --prompt`
    # prints the prompt and the text of the ids `generate --tokens` picks from its ids
    import json
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    config = json.load(open(os.path.join(root, "examples", "models", "tiny-softmax.json")))
    config["vocab_size"] = hf_json.get_vocab_size(with_added_tokens=True)
    model = os.path.join(WORK, "model")
    with open(os.path.join(WORK, "config.json"), "w") as f:
        json.dump(config, f)
    subprocess.run([CLI, "make-model", "--config", os.path.join(WORK, "config.json"), "--out", model, "--seed", "3"],
                   check=True, capture_output=True)
    shutil.copy(os.path.join(json_dir, "tokenizer.json"), model)
    prompt = "the quick brown fox"
    prompt_ids = ",".join(map(str, hf_json.encode(prompt).ids))
    by_ids = subprocess.run([CLI, "generate", "--model", model, "--tokens", prompt_ids, "--max-new", "6"], check=True,
                            capture_output=True, text=True).stdout.strip()
    new_ids = [int(x) for x in by_ids.split(",")][len(hf_json.encode(prompt).ids):]
    by_text = subprocess.run([CLI, "generate", "--model", model, "--prompt", prompt, "--max-new", "6"], check=True,
                             capture_output=True).stdout
    want = (prompt + hf_json.decode(new_ids, skip_special_tokens=False) + "\n").encode()
    if len(new_ids) != 6 or by_text != want:
        failures += 1
        print("generate --prompt printed %r, want %r (ids %s)" % (by_text, want, new_ids))
    else:
        print("generate --prompt: %r" % by_text.decode())
    if failures:
        sys.exit("%d mismatches" % failures)
    print("all identical")


main()
