package main

// Mutated copies of files/mixed_quant.mcf, each with mantle's verdict.

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/samcharles93/mantle/pkg/mcf"
)

type Patch struct {
	Offset uint64 `json:"offset"`
	Old    string `json:"old"`
	New    string `json:"new"`
}

// Mutation says what was changed: Field names the changed field and
// FieldOffset its absolute byte offset in the file (for truncations, the new
// length).
type Mutation struct {
	Name        string  `json:"name"`
	Description string  `json:"description"`
	Field       string  `json:"field"`
	FieldOffset uint64  `json:"field_offset"`
	TruncateTo  *int    `json:"truncate_to,omitempty"`
	Patches     []Patch `json:"patches,omitempty"`
}

type mut struct {
	b []byte
	m Mutation
}

func (x *mut) put(off uint64, nb []byte) {
	old := append([]byte(nil), x.b[off:off+uint64(len(nb))]...)
	copy(x.b[off:], nb)
	x.m.Patches = append(x.m.Patches, Patch{off, hex.EncodeToString(old), hex.EncodeToString(nb)})
}
func (x *mut) u16(off uint64, v uint16) { x.put(off, binary.LittleEndian.AppendUint16(nil, v)) }
func (x *mut) u32(off uint64, v uint32) { x.put(off, binary.LittleEndian.AppendUint32(nil, v)) }
func (x *mut) u64(off uint64, v uint64) { x.put(off, binary.LittleEndian.AppendUint64(nil, v)) }

type layout struct {
	b                          []byte
	dirOff                     uint64
	sec                        map[mcf.SectionType]uint64 // directory entry absolute offset
	secOff, secSize            map[mcf.SectionType]uint64
	tiOff, entriesOff, dimsOff uint64
	stringsOff, stringsSize    uint64
	qiOff                      uint64
	tensor                     map[string]int
}

func (l *layout) entry(i int) uint64 { return l.tiOff + l.entriesOff + uint64(i)*40 }
func (l *layout) dataOff(name string) uint64 {
	return le64(l.b, int(l.entry(l.tensor[name])+24))
}

func genMutated() {
	baseRel := "files/mixed_quant.mcf"
	base, err := os.ReadFile(filepath.Join(*outDir, baseRel))
	must(err)
	mf, err := mcf.Open(filepath.Join(*outDir, baseRel))
	must(err)
	L := &layout{b: base, dirOff: mf.Header.SectionDirOffset, sec: map[mcf.SectionType]uint64{},
		secOff: map[mcf.SectionType]uint64{}, secSize: map[mcf.SectionType]uint64{}, tensor: map[string]int{}}
	for i, s := range mf.Sections {
		t := mcf.SectionType(s.Type)
		L.sec[t] = L.dirOff + uint64(i)*24
		L.secOff[t], L.secSize[t] = s.Offset, s.Size
	}
	L.tiOff = L.secOff[mcf.SectionTensorIndex]
	L.entriesOff = le64(base, int(L.tiOff+16))
	L.dimsOff = le64(base, int(L.tiOff+24))
	L.stringsOff = le64(base, int(L.tiOff+32))
	L.stringsSize = le64(base, int(L.tiOff+40))
	L.qiOff = L.secOff[mcf.SectionQuantInfo]
	idx, err := mcf.ParseTensorIndexSection(mf.SectionData(mf.Section(mcf.SectionTensorIndex)))
	must(err)
	for i := 0; i < idx.Count(); i++ {
		n, _ := idx.Name(i)
		L.tensor[strings.Clone(n)] = i
	}
	mf.Close()
	fileLen := uint64(len(base))
	miOff := L.secOff[mcf.SectionModelInfo]
	tdOff, tdSize := L.secOff[mcf.SectionTensorData], L.secSize[mcf.SectionTensorData]
	q8, k4 := "q8.blk.partial", "k4.blk.multi_super"
	k4Sub := L.dataOff(k4) + 64 // rows 4 x 1 super-block: align64(2*4) = 64

	type def struct {
		name, desc, field string
		off               uint64
		trunc             int
		do                func(x *mut)
	}
	rec := func(i int) uint64 { return L.qiOff + 8 + uint64(i)*24 }
	defs := []def{
		{"trunc_39", "file cut to 39 bytes (shorter than the header)", "header", 0, 39, nil},
		{"trunc_last_byte", "last byte of the directory removed (file_size no longer the real length)", "file_size", 24, int(fileLen) - 1, nil},
		{"trunc_half", "file cut in the middle of TensorData", "file_size", 24, int(tdOff + tdSize/2), nil},
		{"bad_magic", "magic MCF\\x01", "magic", 0, 0, func(x *mut) { x.put(0, []byte("MCF\x01")) }},
		{"major_2", "major version 2", "major", 4, 0, func(x *mut) { x.u16(4, 2) }},
		{"minor_9", "minor version 9 (unknown minor: accepted)", "minor", 6, 0, func(x *mut) { x.u16(6, 9) }},
		{"header_size_39", "header_size 39", "header_size", 8, 0, func(x *mut) { x.u32(8, 39) }},
		{"header_size_64", "header_size 64: the first section (offset 40) now overlaps the header", "header_size", 8, 0, func(x *mut) { x.u32(8, 64) }},
		{"file_size_plus1", "file_size one more than the real length", "file_size", 24, 0, func(x *mut) { x.u64(24, fileLen+1) }},
		{"section_count_0", "section_count 0", "section_count", 12, 0, func(x *mut) { x.u32(12, 0) }},
		{"section_count_huge", "section_count 0xffffffff", "section_count", 12, 0, func(x *mut) { x.u32(12, 0xffffffff) }},
		{"section_count_minus1", "section_count one less (the last directory entry, config.json, is dropped)", "section_count", 12, 0, func(x *mut) { x.u32(12, uint32(len(L.sec)-1)) }},
		{"dir_offset_past_eof", "section_dir_offset = file length", "section_dir_offset", 16, 0, func(x *mut) { x.u64(16, fileLen) }},
		{"dir_offset_in_header", "section_dir_offset = 8", "section_dir_offset", 16, 0, func(x *mut) { x.u64(16, 8) }},
		{"dir_offset_unaligned", "section_dir_offset - 4 (directory read 4 bytes early, entries garbled)", "section_dir_offset", 16, 0, func(x *mut) { x.u64(16, L.dirOff-4) }},
		{"flags_unknown_bits", "header flags |= 0x8000000000000002", "flags", 32, 0, func(x *mut) { x.u64(32, 1|0x8000000000000002) }},
		{"flags_aligned_cleared", "flag TensorDataAligned64 cleared while quantized tensors exist", "flags", 32, 0, func(x *mut) { x.u64(32, 0) }},
		{"sec_unaligned", "TensorIndex section offset +4, size -4", "section[TensorIndex].offset", L.sec[mcf.SectionTensorIndex] + 8, 0, func(x *mut) {
			x.u64(L.sec[mcf.SectionTensorIndex]+8, L.tiOff+4)
			x.u64(L.sec[mcf.SectionTensorIndex]+16, L.secSize[mcf.SectionTensorIndex]-4)
		}},
		{"sec_overlap", "config.json section offset = ModelInfo offset (sections overlap, both 8-aligned)", "section[config.json].offset", L.sec[mcf.SectionHFConfigJSON] + 8, 0, func(x *mut) {
			x.u64(L.sec[mcf.SectionHFConfigJSON]+8, miOff)
		}},
		{"sec_overlaps_dir", "TensorIndex size extended into the section directory", "section[TensorIndex].size", L.sec[mcf.SectionTensorIndex] + 16, 0, func(x *mut) {
			x.u64(L.sec[mcf.SectionTensorIndex]+16, L.dirOff+8-L.tiOff)
		}},
		{"sec_past_eof", "config.json size = file length", "section[config.json].size", L.sec[mcf.SectionHFConfigJSON] + 16, 0, func(x *mut) {
			x.u64(L.sec[mcf.SectionHFConfigJSON]+16, fileLen)
		}},
		{"sec_offset_wraps", "config.json offset 0xfffffffffffffff8 (offset + size wraps)", "section[config.json].offset", L.sec[mcf.SectionHFConfigJSON] + 8, 0, func(x *mut) {
			x.u64(L.sec[mcf.SectionHFConfigJSON]+8, 0xfffffffffffffff8)
		}},
		{"sec_in_header", "ModelInfo offset 16 (inside the header)", "section[ModelInfo].offset", L.sec[mcf.SectionModelInfo] + 8, 0, func(x *mut) {
			x.u64(L.sec[mcf.SectionModelInfo]+8, 16)
		}},
		{"sec_dup_type", "config.json entry retyped as TensorIndex (0x0003 twice; the first wins in mantle)", "section[config.json].type", L.sec[mcf.SectionHFConfigJSON], 0, func(x *mut) {
			x.u32(L.sec[mcf.SectionHFConfigJSON], 3)
		}},
		{"sec_unknown_type", "config.json entry retyped 0x7777", "section[config.json].type", L.sec[mcf.SectionHFConfigJSON], 0, func(x *mut) {
			x.u32(L.sec[mcf.SectionHFConfigJSON], 0x7777)
		}},
		{"no_tensor_index", "TensorIndex entry retyped 0x7003", "section[TensorIndex].type", L.sec[mcf.SectionTensorIndex], 0, func(x *mut) {
			x.u32(L.sec[mcf.SectionTensorIndex], 0x7003)
		}},
		{"no_tensor_data", "TensorData entry retyped 0x7004", "section[TensorData].type", L.sec[mcf.SectionTensorData], 0, func(x *mut) {
			x.u32(L.sec[mcf.SectionTensorData], 0x7004)
		}},
		{"ti_version_2", "TensorIndex version 2", "tensor_index.version", L.tiOff, 0, func(x *mut) { x.u32(L.tiOff, 2) }},
		{"ti_count_0", "TensorIndex tensor_count 0", "tensor_index.tensor_count", L.tiOff + 8, 0, func(x *mut) { x.u32(L.tiOff+8, 0) }},
		{"ti_count_huge", "TensorIndex tensor_count 0xffffffff", "tensor_index.tensor_count", L.tiOff + 8, 0, func(x *mut) { x.u32(L.tiOff+8, 0xffffffff) }},
		{"ti_entries_off_oob", "TensorIndex entries_off = section size", "tensor_index.entries_off", L.tiOff + 16, 0, func(x *mut) { x.u64(L.tiOff+16, L.secSize[mcf.SectionTensorIndex]) }},
		{"ti_strings_wrap", "strings_size = 2^64 - strings_off + 8 (strings_off + strings_size wraps to 8)", "tensor_index.strings_size", L.tiOff + 40, 0, func(x *mut) {
			x.u64(L.tiOff+40, -L.stringsOff+8)
		}},
		{"ti_name_oob", "entry 0 name_off = strings_size (name past the string table)", "tensor[0].name_off", L.entry(0), 0, func(x *mut) { x.u32(L.entry(0), uint32(L.stringsSize)) }},
		{"ti_rank_huge", "entry 4 (plain.bias) rank 0xffffffff", "tensor[4].rank", L.entry(4) + 12, 0, func(x *mut) { x.u32(L.entry(4)+12, 0xffffffff) }},
		{"ti_dim_off_oob", "entry 4 dim_off = dims_count", "tensor[4].dim_off", L.entry(4) + 16, 0, func(x *mut) {
			x.u32(L.entry(4)+16, le32(L.b, int(L.tiOff+12)))
		}},
		{"ti_names_unsorted", "entries 0 and 1 swap their (name_off, name_len): names no longer sorted (flag bit0 still set)", "tensor[0].name_off", L.entry(0), 0, func(x *mut) {
			a, b := append([]byte(nil), L.b[L.entry(0):L.entry(0)+8]...), append([]byte(nil), L.b[L.entry(1):L.entry(1)+8]...)
			x.put(L.entry(0), b)
			x.put(L.entry(1), a)
		}},
		{"ti_dup_names", "entry 1 name = entry 0 name", "tensor[1].name_off", L.entry(1), 0, func(x *mut) {
			x.put(L.entry(1), append([]byte(nil), L.b[L.entry(0):L.entry(0)+8]...))
		}},
		{"ti_name_not_utf8", "first byte of entry 4's name (plain.bias) = 0xff", "tensor[4].name", L.tiOff + L.stringsOff + uint64(le32(L.b, int(L.entry(4)))), 0, func(x *mut) {
			x.put(L.tiOff+L.stringsOff+uint64(le32(L.b, int(L.entry(4)))), []byte{0xff})
		}},
		{"ti_dtype_unknown", "entry 4 dtype 0x99", "tensor[4].dtype", L.entry(4) + 8, 0, func(x *mut) { x.u32(L.entry(4)+8, 0x99) }},
		{"ti_dtype_over_u16", "entry 4 dtype 0x10001 (mantle reads dtype as u32 and rejects > 0xffff)", "tensor[4].dtype", L.entry(4) + 8, 0, func(x *mut) { x.u32(L.entry(4)+8, 0x10001) }},
		{"ti_plain_as_q8", "entry 4 (f32 [40]) dtype q8: rank 1 quantized", "tensor[4].dtype", L.entry(4) + 8, 0, func(x *mut) { x.u32(L.entry(4)+8, 0x20) }},
		{"ti_data_outside_tensordata", "entry 4 data_off = ModelInfo offset (inside the file, outside TensorData)", "tensor[4].data_off", L.entry(4) + 24, 0, func(x *mut) { x.u64(L.entry(4)+24, miOff) }},
		{"ti_data_past_eof", "entry 4 data_off = file length", "tensor[4].data_off", L.entry(4) + 24, 0, func(x *mut) { x.u64(L.entry(4)+24, fileLen) }},
		{"ti_data_wraps", "entry 4 data_size 0xffffffffffffff00 (data_off + data_size wraps)", "tensor[4].data_size", L.entry(4) + 32, 0, func(x *mut) { x.u64(L.entry(4)+32, 0xffffffffffffff00) }},
		{"ti_data_size_small", "entry 4 (f32 [40]) data_size 156", "tensor[4].data_size", L.entry(4) + 32, 0, func(x *mut) { x.u64(L.entry(4)+32, 156) }},
		{"ti_quant_unaligned", "entry 6 (q8) data_off + 8", "tensor[6].data_off", L.entry(6) + 24, 0, func(x *mut) { x.u64(L.entry(6)+24, L.dataOff(q8)+8) }},
		{"ti_quant_size_mismatch", "entry 6 (q8 [3,40]) data_size + 64", "tensor[6].data_size", L.entry(6) + 32, 0, func(x *mut) {
			x.u64(L.entry(6)+32, le64(L.b, int(L.entry(6)+32))+64)
		}},
		{"ti_quant_dim0", "entry 6 (q8) first dim 0", "tensor[6].dims[0]", L.tiOff + L.dimsOff + 8*uint64(le32(L.b, int(L.entry(6)+16))), 0, func(x *mut) {
			x.u64(L.tiOff+L.dimsOff+8*uint64(le32(L.b, int(L.entry(6)+16))), 0)
		}},
		{"ti_shape_overflow", "entry 4 (f32 rank 1) dim = 2^62 (element count x 4 overflows u64)", "tensor[4].dims[0]", L.tiOff + L.dimsOff + 8*uint64(le32(L.b, int(L.entry(4)+16))), 0, func(x *mut) {
			x.u64(L.tiOff+L.dimsOff+8*uint64(le32(L.b, int(L.entry(4)+16))), 1<<62)
		}},
		{"qi_version_2", "QuantInfo version 2", "quant_info.version", L.qiOff, 0, func(x *mut) { x.u32(L.qiOff, 2) }},
		{"qi_count_huge", "QuantInfo record_count 0xffffffff", "quant_info.record_count", L.qiOff + 4, 0, func(x *mut) { x.u32(L.qiOff+4, 0xffffffff) }},
		{"qi_count_minus1", "QuantInfo record_count - 1 (the q8 tensor has no record)", "quant_info.record_count", L.qiOff + 4, 0, func(x *mut) { x.u32(L.qiOff+4, 5) }},
		{"qi_reserved", "record 0 reserved byte 10 = 1", "quant_record[0].reserved", rec(0) + 10, 0, func(x *mut) { x.put(rec(0)+10, []byte{1}) }},
		{"qi_domain_2", "record 0 domain 2", "quant_record[0].domain", rec(0) + 5, 0, func(x *mut) { x.put(rec(0)+5, []byte{2}) }},
		{"qi_domain_activations", "record 0 (k2) domain 1 (activations: not allowed for k*)", "quant_record[0].domain", rec(0) + 5, 0, func(x *mut) { x.put(rec(0)+5, []byte{1}) }},
		{"qi_method_mismatch", "record 0 (k2 tensor) method k3 (valid record, wrong dtype)", "quant_record[0].method", rec(0) + 4, 0, func(x *mut) { x.put(rec(0)+4, []byte{0x32}) }},
		{"qi_method_unknown", "record 0 method 0x40", "quant_record[0].method", rec(0) + 4, 0, func(x *mut) { x.put(rec(0)+4, []byte{0x40}) }},
		{"qi_tensor_index_oob", "record 0 tensor_index 7 (= tensor_count)", "quant_record[0].tensor_index", rec(0), 0, func(x *mut) { x.u32(rec(0), 7) }},
		{"qi_for_plain_tensor", "record 0 tensor_index 4 (the f32 tensor)", "quant_record[0].tensor_index", rec(0), 0, func(x *mut) { x.u32(rec(0), 4) }},
		{"qi_block_size", "record 0 block_size 64", "quant_record[0].block_size", rec(0) + 6, 0, func(x *mut) { x.u16(rec(0)+6, 64) }},
		{"qi_super_size", "record 5 (q8) super_size 256", "quant_record[5].super_size", rec(5) + 8, 0, func(x *mut) { x.u16(rec(5)+8, 256) }},
		{"qi_nan_clip", "record 0 min_clip NaN, max_clip +Inf", "quant_record[0].min_clip", rec(0) + 16, 0, func(x *mut) {
			x.u32(rec(0)+16, 0x7fc00000)
			x.u32(rec(0)+20, 0x7f800000)
		}},
		{"qi_dup_record", "record 1 = copy of record 0 (tensor 0 has two records, tensor 1 none)", "quant_record[1]", rec(1), 0, func(x *mut) {
			x.put(rec(1), append([]byte(nil), L.b[rec(0):rec(0)+24]...))
		}},
		{"payload_nan_scale", "q8 tensor: block 0 scale f16 0x7e00 (NaN)", "tensor[6].scales[0]", L.dataOff(q8), 0, func(x *mut) { x.u16(L.dataOff(q8), 0x7e00) }},
		{"payload_inf_scale", "k4 tensor: super-block 0 scale f16 0x7c00 (+Inf)", "tensor[2].super_scales[0]", L.dataOff(k4), 0, func(x *mut) { x.u16(L.dataOff(k4), 0x7c00) }},
		{"payload_subnormal_scale", "q8 tensor: block 1 scale f16 0x0001 (subnormal: mantle flushes it to 0)", "tensor[6].scales[1]", L.dataOff(q8) + 2, 0, func(x *mut) { x.u16(L.dataOff(q8)+2, 0x0001) }},
		{"payload_negative_scale", "q8 tensor: block 0 scale sign bit set", "tensor[6].scales[0]", L.dataOff(q8) + 1, 0, func(x *mut) {
			x.put(L.dataOff(q8)+1, []byte{L.b[L.dataOff(q8)+1] | 0x80})
		}},
		{"payload_u6_top_bits", "k4 tensor: sub-scale 0 |= 0xc0 (mantle masks with 0x3f)", "tensor[2].sub_scales[0]", k4Sub, 0, func(x *mut) { x.put(k4Sub, []byte{L.b[k4Sub] | 0xc0}) }},
		{"payload_u6_zero", "k4 tensor: sub-scale 1 = 0 (block decodes to zeros)", "tensor[2].sub_scales[1]", k4Sub + 1, 0, func(x *mut) { x.put(k4Sub+1, []byte{0}) }},
		{"mi_version_2", "ModelInfo version 2 (mantle has no ModelInfo reader)", "model_info.version", miOff, 0, func(x *mut) { x.u32(miOff, 2) }},
		{"mi_kv_count_huge", "ModelInfo kv_count 0xffffffff", "model_info.kv_count", miOff + 72, 0, func(x *mut) { x.u32(miOff+72, 0xffffffff) }},
		{"mi_name_off_oob", "ModelInfo model_name_off = section size", "model_info.model_name_off", miOff + 56, 0, func(x *mut) { x.u64(miOff+56, L.secSize[mcf.SectionModelInfo]) }},
		{"mi_rope_nan", "ModelInfo rope_freq_base NaN", "model_info.rope_freq_base", miOff + 48, 0, func(x *mut) { x.u32(miOff+48, math.Float32bits(float32(math.NaN()))) }},
	}
	seen := map[string]bool{}
	for _, d := range defs {
		if seen[d.name] {
			must(fmt.Errorf("duplicate mutation %s", d.name))
		}
		seen[d.name] = true
		x := &mut{b: append([]byte(nil), base...), m: Mutation{Name: d.name, Description: d.desc, Field: d.field, FieldOffset: d.off}}
		if d.trunc > 0 {
			t := d.trunc
			x.b = x.b[:t]
			x.m.TruncateTo = &t
			if d.field == "header" {
				x.m.FieldOffset = uint64(t)
			}
		} else {
			d.do(x)
		}
		rel := "mutated/" + d.name + ".mcf"
		must(os.WriteFile(filepath.Join(*outDir, rel), x.b, 0o644))
		f := add(rel, "mutated", "byte patch of "+baseRel+" (see mutation)", []string{d.desc}, nil, nil)
		f.Base = baseRel
		m := x.m
		f.Mutation = &m
	}
}
