#!/usr/bin/env python3
"""Writes the hand-made corpus of malformed safetensors files and the exact
error each must produce (tests/data/bad_safetensors/EXPECTED, one
`file<TAB>message` per line; `{file}` stands for the file's path). Run from
anywhere; the outputs are committed so the corpus is reviewable."""
import json
import os
import struct

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bad_safetensors")
cases = []


def raw(name, data, expected):
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)
    cases.append((name, expected))


def st(name, header, data_len, expected, header_text=None):
    text = header_text if header_text is not None else json.dumps(header)
    b = text.encode()
    raw(name, struct.pack("<Q", len(b)) + b + bytes(data_len), expected)


os.makedirs(HERE, exist_ok=True)
for f in os.listdir(HERE):
    os.remove(os.path.join(HERE, f))

raw("too_short.safetensors", b"\x01\x02\x03",
    "{file}: file is 3 bytes, too short for a safetensors header")
raw("header_len_huge.safetensors", struct.pack("<Q", 1 << 40) + b"{}",
    "{file}: header length 1099511627776 exceeds the limit of 67108864")
raw("header_past_eof.safetensors", struct.pack("<Q", 100) + b"{}" + bytes(48),
    "{file}: header length 100 extends past end of file (58 bytes)")
st("not_object.safetensors", None, 0, "{file}: header is not a JSON object", header_text="[1,2]")
st("truncated_json.safetensors", None, 0,
   "{file}: header is not valid JSON (*)", header_text='{"a": {"dtype": "F32"')
st("unknown_dtype.safetensors", {"w": {"dtype": "Q4", "shape": [2], "data_offsets": [0, 2]}}, 2,
   "{file}: tensor 'w': unknown dtype 'Q4'")
st("past_end.safetensors", {"w": {"dtype": "F32", "shape": [16], "data_offsets": [0, 64]}}, 32,
   "{file}: tensor 'w': data_offsets [0, 64) extend past the end of the data region (32 bytes)")
st("overlap.safetensors",
   {"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
    "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}}, 24,
   "{file}: tensor 'b': overlaps tensor 'a'")
st("size_mismatch.safetensors", {"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 8]}}, 8,
   "{file}: tensor 'w': data_offsets span 8 bytes but F32 shape needs 16")
st("shape_overflow.safetensors",
   {"w": {"dtype": "U8", "shape": [1 << 32, 1 << 32], "data_offsets": [0, 1]}}, 1,
   "{file}: tensor 'w': shape product overflows")
st("bytes_overflow.safetensors",
   {"w": {"dtype": "F32", "shape": [1 << 62], "data_offsets": [0, 1]}}, 1,
   "{file}: tensor 'w': byte size overflows")
st("negative_dim.safetensors", {"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}, 4,
   "{file}: tensor 'w': shape entries must be non-negative integers")
st("float_dim.safetensors", {"w": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}}, 4,
   "{file}: tensor 'w': shape entries must be non-negative integers")
st("begin_after_end.safetensors", {"w": {"dtype": "F32", "shape": [0], "data_offsets": [8, 4]}}, 8,
   "{file}: tensor 'w': data_offsets begin > end")
st("negative_offset.safetensors", {"w": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}}, 8,
   "{file}: tensor 'w': data_offsets must be non-negative integers")
st("offsets_arity.safetensors", {"w": {"dtype": "F32", "shape": [1], "data_offsets": [0]}}, 4,
   "{file}: tensor 'w': data_offsets must be [begin, end]")
st("missing_dtype.safetensors", {"w": {"shape": [1], "data_offsets": [0, 4]}}, 4,
   "{file}: tensor 'w': missing dtype")
st("missing_shape.safetensors", {"w": {"dtype": "F32", "data_offsets": [0, 4]}}, 4,
   "{file}: tensor 'w': missing shape")
st("entry_not_object.safetensors", {"w": 7}, 0, "{file}: tensor 'w': entry is not an object")
st("rank_too_high.safetensors",
   {"w": {"dtype": "U8", "shape": [1] * 9, "data_offsets": [0, 1]}}, 1,
   "{file}: tensor 'w': rank 9 exceeds 8")
st("duplicate_name.safetensors", None, 8,
   "{file}: tensor 'w': name appears twice in the header",
   header_text='{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
               '"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}')
st("metadata_not_string.safetensors", {"__metadata__": {"format": 1}}, 0,
   "{file}: __metadata__ value 'format' is not a string")
st("metadata_not_object.safetensors", {"__metadata__": [1]}, 0,
   "{file}: __metadata__ is not an object")
st("empty_name.safetensors", {"": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, 4,
   "{file}: tensor '': empty tensor name")

with open(os.path.join(HERE, "EXPECTED"), "w") as f:
    for name, msg in cases:
        f.write(f"{name}\t{msg}\n")
print(f"wrote {len(cases)} cases to {HERE}")
