#!/usr/bin/env python3
"""Seeds for fuzz/fuzz_tokjson.c: Hugging Face tokenizer.json files, written here as text (a
byte-level BPE with "a b" merges and with ["a", "b"] pairs, a WordPiece with added tokens,
escapes, non-ASCII keys, every kind of JSON value in the settings), plus broken ones (a key
twice, a vocabulary that is not an object, nesting at and past jansson's 2048 levels, numbers
at the edges of 64-bit integers and doubles, bad escapes, bad UTF-8, truncations).

    .venv/bin/python fuzz/make_tokjson_seeds.py [OUT_DIR]   (default fuzz/corpus/tokjson)
"""
import hashlib
import sys
from pathlib import Path

BPE = ('{"version":"1.0","truncation":null,"padding":null,"added_tokens":[{"id":5,"content":'
       '"<|endoftext|>","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,'
       '"special":true}],"normalizer":null,"pre_tokenizer":{"type":"ByteLevel","add_prefix_space"'
       ':false,"trim_offsets":true,"use_regex":true},"post_processor":{"type":"ByteLevel"},'
       '"decoder":{"type":"ByteLevel"},"model":{"type":"BPE","dropout":null,"unk_token":null,'
       '"byte_fallback":false,"vocab":{"a":0,"b":1,"ab":2,"\\u0120a":3,"\u0120b":4},'
       '"merges":["a b","\u0120 a"]}}')
BPE_PAIRS = BPE.replace('"merges":["a b","\u0120 a"]', '"merges":[["a","b"],["\\u0120","a"]]')
WPM = ('{"added_tokens":[{"id":0,"content":"[PAD]","special":true},{"id":1,"content":"[UNK]",'
       '"special":true}],"normalizer":{"type":"BertNormalizer","lowercase":true},'
       '"post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"[CLS]",'
       '"type_id":0}},{"Sequence":{"id":"A","type_id":0}}],"special_tokens":{}},'
       '"model":{"type":"WordPiece","unk_token":"[UNK]","max_input_chars_per_word":100,'
       '"vocab":{"[PAD]":0,"[UNK]":1,"[CLS]":2,"[SEP]":3,"[MASK]":4,"h\\u00e9":5,"##llo":6,'
       '"\\ud83d\\ude00":7,"tab\\t":8}}}')
VALUES = ('{"model":{"type":"BPE","vocab":{},"merges":[]},"x":[0,-0,1.5,-2.5e-3,1E+2,'
          '9223372036854775807,-9223372036854775808,1.7976931348623157e308,1e-400,true,false,'
          'null,"",{"":[]},"\\"\\\\\\/\\b\\f\\n\\r\\t"]}')

BROKEN = [
    '{"model":{"vocab":{"a":0,"b":1,"a":2}}}',                 # a key twice
    '{"model":{"vocab":{"a":0,"\\u0061":1}}}',                 # the same key, escaped
    '{"model":{"vocab":{' + ','.join(f'"t{i}":{i}' for i in range(20)) + ',"t7":7}}}',  # indexed
    '{"model":{"vocab":["a","b"]}}',                           # not an object
    '{"a":' + '[' * 2047 + ']' * 2047 + '}',                   # 2048 levels: read
    '{"a":' + '[' * 2048 + ']' * 2048 + '}',                   # 2049: refused
    '{"n":9223372036854775808}', '{"n":-9223372036854775809}',
    '{"n":1.7976931348623159e308}', '{"n":1e400}', '{"n":01}', '{"n":1.}', '{"n":-}',
    '{"s":"\\u0000"}', '{"s":"\\ud800"}', '{"s":"\\udc00"}', '{"s":"\\x"}', '{"s":"a\nb"}',
    b'{"s":"\xc3\x28"}', b'{"s":"\xed\xa0\x80"}', '{"a":1}x', '[1]', '', ' ', '{"a":tru}',
    BPE[:len(BPE) // 2], WPM[:-1],
]


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "corpus" / "tokjson"
    out.mkdir(parents=True, exist_ok=True)
    for text in [BPE, BPE_PAIRS, WPM, VALUES] + BROKEN:
        data = text.encode("utf-8") if isinstance(text, str) else text
        name = hashlib.sha1(data).hexdigest()
        (out / name).write_bytes(data)
    print(f"wrote {4 + len(BROKEN)} seeds to {out}")


if __name__ == "__main__":
    main()
