package main

// Everything that touches mantle: writing files with its pkg/mcf Writer,
// running its CLI (pack, quantize), and reading files back with its own
// reader (pkg/mcf, internal/mcfstore) and decoders (internal/backend/core).

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/samcharles93/mantle/internal/backend/core"
	"github.com/samcharles93/mantle/internal/mcfstore"
	"github.com/samcharles93/mantle/pkg/mcf"
)

type tensorSpec struct {
	Name    string
	DType   mcf.TensorDType
	Shape   []uint64
	Data    []byte
	AliasOf string // reuse the payload (data_off, data_size) of an earlier tensor
}

type sectionSpec struct {
	Type    mcf.SectionType
	Version uint32
	Data    []byte
}

type mcfSpec struct {
	Sections  []sectionSpec // written first, in this order
	ModelInfo *mcf.ModelInfo
	Tensors   []tensorSpec // written in this order (pack writes name order)
	Quant     map[string]mcf.QuantRecord
	Flags     uint64
	NoIndex   bool
}

// writeWithWriter builds a file with mantle's pkg/mcf Writer the way pack does:
// sections, ModelInfo (version 1), TensorData (version 1, each tensor 64-aligned),
// TensorIndex, QuantInfo, Finalise.
func writeWithWriter(path string, s mcfSpec) {
	f, err := os.Create(path)
	must(err)
	defer f.Close()
	w, err := mcf.NewWriter(f)
	must(err)
	if s.Flags != 0 {
		must(w.AddFlags(s.Flags))
	}
	for _, sec := range s.Sections {
		must(w.WriteSection(sec.Type, sec.Version, sec.Data))
	}
	if s.ModelInfo != nil {
		b, err := mcf.EncodeModelInfo(s.ModelInfo)
		must(err)
		must(w.WriteSection(mcf.SectionModelInfo, 1, b))
	}
	if len(s.Tensors) == 0 {
		must(w.Finalise())
		return
	}
	td, err := w.BeginSection(mcf.SectionTensorData, 1)
	must(err)
	type placed struct{ off, size uint64 }
	at := map[string]placed{}
	recs := []mcf.TensorIndexRecord{}
	for _, t := range s.Tensors {
		var p placed
		if t.AliasOf != "" {
			var ok bool
			p, ok = at[t.AliasOf]
			if !ok {
				must(fmt.Errorf("alias of unknown tensor %q", t.AliasOf))
			}
		} else {
			must(td.Align(64))
			off, err := td.CurrentAbsOffset()
			must(err)
			_, err = td.Write(t.Data)
			must(err)
			p = placed{off, uint64(len(t.Data))}
		}
		at[t.Name] = p
		recs = append(recs, mcf.TensorIndexRecord{Name: t.Name, DType: t.DType, Shape: t.Shape, DataOff: p.off, DataSize: p.size})
	}
	must(td.End())
	idx, err := mcf.EncodeTensorIndexSection(recs)
	must(err)
	if !s.NoIndex {
		must(w.WriteSection(mcf.SectionTensorIndex, mcf.TensorIndexVersion, idx))
	}
	if s.Quant != nil {
		names := make([]string, 0, len(recs))
		for _, r := range recs {
			names = append(names, r.Name)
		}
		sort.Strings(names)
		var qrecs []mcf.QuantRecord
		for i, n := range names {
			if q, ok := s.Quant[n]; ok {
				q.TensorIndex = uint32(i)
				qrecs = append(qrecs, q)
			}
		}
		qb, err := mcf.EncodeQuantInfoSection(qrecs)
		must(err)
		must(w.WriteSection(mcf.SectionQuantInfo, mcf.QuantInfoVersion, qb))
	}
	must(w.Finalise())
}

// runMantle runs the mantle CLI with cwd = the fixture directory; it returns
// the command line as recorded in the manifest.
func runMantle(bin, dir string, args ...string) string {
	cmd := exec.Command(bin, append([]string{"--log-level", "error"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		must(fmt.Errorf("mantle %s: %v\n%s", strings.Join(args, " "), err, out))
	}
	return "mantle " + strings.Join(args, " ")
}

var sectionNames = map[uint32]string{
	0x0001: "ModelInfo", 0x0002: "QuantInfo", 0x0003: "TensorIndex", 0x0004: "TensorData",
	0x0100: "config.json", 0x0101: "generation_config.json", 0x0102: "tokenizer.json",
	0x0103: "tokenizer_config.json", 0x0104: "vocab.json", 0x0105: "merges.txt",
}

var dtypeNames = map[mcf.TensorDType]string{
	1: "f32", 2: "f16", 3: "bf16", 4: "f64", 5: "i8", 6: "u8", 7: "i16", 8: "u16", 9: "i32",
	10: "u32", 11: "i64", 12: "u64", 0x10: "int8", 0x11: "int4", 0x20: "q8", 0x21: "q4",
	0x30: "k6", 0x31: "k4", 0x32: "k3", 0x33: "k2",
}

// Verdict is what mantle's own code says about a file, stage by stage:
// open = pkg/mcf.Open (header, directory); store = internal/mcfstore.Open
// (TensorIndex, QuantInfo, quant payload sizes/alignment/flag); tensors = per
// tensor read + decode (ReadTensorRaw, then ReadTensorF32 or core.Mat.RowTo).
type Verdict struct {
	Open    string            `json:"open"`
	Store   string            `json:"store"`
	Tensors map[string]string `json:"tensors,omitempty"`
}

type QuantJSON struct {
	Record      int    `json:"record"`
	Method      uint8  `json:"method"`
	Domain      uint8  `json:"domain"`
	BlockSize   uint16 `json:"block_size"`
	SuperSize   uint16 `json:"super_size"`
	MinClip     any    `json:"min_clip"` // number, or "NaN" / "Inf" / "-Inf"
	MaxClip     any    `json:"max_clip"`
	MinClipBits string `json:"min_clip_bits"`
	MaxClipBits string `json:"max_clip_bits"`
}

type TensorJSON struct {
	Index     int        `json:"index"`
	Name      string     `json:"name"`     // lossy where the bytes are not UTF-8: use name_hex
	NameHex   string     `json:"name_hex"` // the name's bytes
	DType     int        `json:"dtype"`
	DTypeName string     `json:"dtype_name"`
	Shape     []uint64   `json:"shape"`
	DataOff   uint64     `json:"data_off"`
	DataSize  uint64     `json:"data_size"`
	RawSHA256 string     `json:"raw_sha256"`
	AliasOf   string     `json:"alias_of,omitempty"`
	F32       string     `json:"f32,omitempty"`
	F32SHA256 string     `json:"f32_sha256,omitempty"`
	F32Error  string     `json:"f32_error,omitempty"`
	Quant     *QuantJSON `json:"quant,omitempty"`
}

type SectionJSON struct {
	Type    uint32 `json:"type"`
	Name    string `json:"name"`
	Version uint32 `json:"version"`
	Offset  uint64 `json:"offset"`
	Size    uint64 `json:"size"`
	SHA256  string `json:"sha256"`
}

type HeaderJSON struct {
	Major            uint16 `json:"major"`
	Minor            uint16 `json:"minor"`
	HeaderSize       uint32 `json:"header_size"`
	SectionCount     uint32 `json:"section_count"`
	SectionDirOffset uint64 `json:"section_dir_offset"`
	FileSize         uint64 `json:"file_size"`
	Flags            uint64 `json:"flags"`
}

// decodeQuant decodes a q*/k* tensor with mantle's row decoder (core.Mat.RowTo,
// what its CPU matvec falls back to) and checks that its quant cache
// (BuildQuantCache: int8 codes x per-block scale) gives the same f32 bits.
func decodeQuant(raw []byte, dt mcf.TensorDType, shape []int) (out []float32, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	if len(shape) != 2 {
		return nil, fmt.Errorf("quant tensor rank %d", len(shape))
	}
	m := core.Mat{R: shape[0], C: shape[1], Stride: shape[1], DType: dt, Raw: raw}
	out = make([]float32, m.R*m.C)
	for r := 0; r < m.R; r++ {
		m.RowTo(out[r*m.C:(r+1)*m.C], r)
	}
	qc, err := core.BuildQuantCache(&m)
	if err != nil {
		return nil, fmt.Errorf("BuildQuantCache: %w", err)
	}
	for r := 0; r < m.R; r++ {
		for c := 0; c < m.C; c++ {
			b := r*qc.BlocksPerRow + c/32
			v := float32(qc.Q[b*32+c%32]) * qc.Scales[b]
			if math.Float32bits(v) != math.Float32bits(out[r*m.C+c]) && !(v != v && out[r*m.C+c] != out[r*m.C+c]) {
				return nil, fmt.Errorf("mantle decoders disagree at [%d,%d]: RowTo %g, QuantCache %g", r, c, out[r*m.C+c], v)
			}
		}
	}
	return out, nil
}

// describe reads a file back with mantle's reader and decoders. If valuesDir
// is not empty, the decoded f32 values are stored there, content-addressed.
func describe(path, valuesDir, relValues string) (Verdict, *HeaderJSON, []SectionJSON, []TensorJSON) {
	v := Verdict{Open: "ok", Store: "ok"}
	data, err := os.ReadFile(path)
	must(err)
	mf, err := mcf.Open(path)
	if err != nil {
		v.Open = err.Error()
		v.Store = "not reached"
		return v, nil, nil, nil
	}
	defer mf.Close()
	h := mf.Header
	hj := &HeaderJSON{h.Major, h.Minor, h.HeaderSize, h.SectionCount, h.SectionDirOffset, h.FileSize, h.Flags}
	var secs []SectionJSON
	for _, s := range mf.Sections {
		secs = append(secs, SectionJSON{s.Type, sectionNames[s.Type], s.Version, s.Offset, s.Size, sha256Hex(mf.SectionData(&s))})
	}
	st, err := mcfstore.Open(path)
	if err != nil {
		v.Store = err.Error()
		return v, hj, secs, nil
	}
	defer st.Close()
	idx, err := mcf.ParseTensorIndexSection(mf.SectionData(mf.Section(mcf.SectionTensorIndex)))
	must(err)
	qrec := map[int]QuantJSON{}
	if qi := st.QuantInfo(); qi != nil {
		for i, r := range qi.Records() {
			if _, dup := qrec[int(r.TensorIndex)]; dup {
				continue // first record wins in this listing; duplicates only in mutated files
			}
			qrec[int(r.TensorIndex)] = QuantJSON{i, r.Method, r.Domain, r.BlockSize, r.SuperSize, jsonF32(r.MinClip), jsonF32(r.MaxClip), f32Bits(r.MinClip), f32Bits(r.MaxClip)}
		}
	}
	v.Tensors = map[string]string{}
	var ts []TensorJSON
	firstAt := map[uint64]string{}
	for i := 0; i < idx.Count(); i++ {
		key := fmt.Sprintf("#%d", i)
		e, err := idx.Entry(i)
		if err != nil {
			v.Tensors[key] = "Entry: " + err.Error()
			continue
		}
		name0, err := idx.Name(i)
		if err != nil {
			v.Tensors[key] = "Name: " + err.Error()
			continue
		}
		name := strings.Clone(name0) // Name is a view of the mmap, gone after Close
		vkey := name                 // verdict key: the name, or hex: when it is not UTF-8
		if !utf8.ValidString(name) {
			vkey = "hex:" + hex.EncodeToString([]byte(name))
		}
		shape, err := idx.Shape(i)
		if err != nil {
			v.Tensors[vkey] = "Shape: " + err.Error()
			continue
		}
		if shape == nil {
			shape = []uint64{}
		}
		t := TensorJSON{Index: i, Name: name, NameHex: hex.EncodeToString([]byte(name)), DType: int(e.DType), DTypeName: dtypeNames[e.DType], Shape: shape, DataOff: e.DataOff, DataSize: e.DataSize}
		if e.DataOff+e.DataSize <= uint64(len(data)) && e.DataOff+e.DataSize >= e.DataOff {
			t.RawSHA256 = sha256Hex(data[e.DataOff : e.DataOff+e.DataSize])
		}
		if first, ok := firstAt[e.DataOff]; ok && e.DataSize > 0 {
			t.AliasOf = first
		} else if e.DataSize > 0 {
			firstAt[e.DataOff] = name
		}
		if q, ok := qrec[i]; ok {
			qq := q
			t.Quant = &qq
		}
		vals, derr := decodeByName(st, name)
		if derr != nil {
			t.F32Error = derr.Error()
			v.Tensors[vkey] = derr.Error()
		} else {
			v.Tensors[vkey] = "ok"
			b := f32Bytes(vals)
			t.F32SHA256 = sha256Hex(b)
			if valuesDir != "" {
				fn := t.F32SHA256[:16] + ".f32"
				must(os.WriteFile(filepath.Join(valuesDir, fn), b, 0o644))
				t.F32 = relValues + "/" + fn
			}
		}
		ts = append(ts, t)
	}
	return v, hj, secs, ts
}

// decodeByName is how mantle's own code turns a tensor into f32: the quant
// families through core.Mat.RowTo, f32/f16/bf16 through mcfstore.ReadTensorF32
// (which refuses every other dtype).
func decodeByName(st *mcfstore.File, name string) (vals []float32, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	info, err := st.Tensor(name)
	if err != nil {
		return nil, err
	}
	if mcf.DTypeRequiresAligned64(info.DType) {
		raw, info, err := st.ReadTensorRaw(name)
		if err != nil {
			return nil, err
		}
		return decodeQuant(raw, info.DType, info.Shape)
	}
	vals, _, err = st.ReadTensorF32(name)
	return vals, err
}

// verdictOnly is describe without outputs, for mutated files.
func verdictOnly(path string) Verdict {
	v, _, _, _ := describe(path, "", "")
	return v
}

func le32(b []byte, off int) uint32 { return binary.LittleEndian.Uint32(b[off:]) }
func le64(b []byte, off int) uint64 { return binary.LittleEndian.Uint64(b[off:]) }

func jsonF32(v float32) any {
	switch {
	case v != v:
		return "NaN"
	case math.IsInf(float64(v), 1):
		return "Inf"
	case math.IsInf(float64(v), -1):
		return "-Inf"
	}
	return v
}
