// Command mcf-fixtures builds tensorbox's MCF reference corpus
// (tests/data/mcf/) with mantle's own code: its pkg/mcf Writer, its `pack` and
// `quantize` commands, its reader and its decoders. It is run by hand (see
// tests/data/mcf/README.md and gen.sh); CI only uses its output.
package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"github.com/samcharles93/mantle/pkg/mcf"
)

// Fixture is one manifest row.
type Fixture struct {
	File      string         `json:"file"`
	Kind      string         `json:"kind"` // writer | pack | quantize | mutated
	MadeBy    string         `json:"made_by"`
	Inputs    map[string]any `json:"inputs,omitempty"`
	Covers    []string       `json:"covers"`
	Size      int64          `json:"size"`
	SHA256    string         `json:"sha256"`
	Mantle    Verdict        `json:"mantle"`
	Header    *HeaderJSON    `json:"header,omitempty"`
	Sections  []SectionJSON  `json:"sections,omitempty"`
	ModelInfo any            `json:"modelinfo,omitempty"`
	Tensors   []TensorJSON   `json:"tensors,omitempty"`
	Base      string         `json:"base,omitempty"`
	Mutation  *Mutation      `json:"mutation,omitempty"`
}

type Manifest struct {
	Format       int       `json:"format"`
	MantleCommit string    `json:"mantle_commit"`
	GoVersion    string    `json:"go_version"`
	GoExperiment string    `json:"goexperiment"`
	Generator    string    `json:"generator"`
	Fixtures     []Fixture `json:"fixtures"`
	Refusals     []Refusal `json:"refusals"`
}

// Refusal is a mantle command that fails on a committed input, with its message.
type Refusal struct {
	Command string `json:"command"`
	Error   string `json:"error"`
}

var (
	outDir    = flag.String("out", "", "fixture directory (tests/data/mcf)")
	mantleBin = flag.String("mantle-bin", "", "mantle binary built from the same checkout")
	commit    = flag.String("mantle-commit", "", "commit of the mantle checkout (recorded)")
	figures   = flag.Bool("figures", false, "measure mantle's quantize/decode figures instead")
	minilm    = flag.String("minilm", "", "with -figures: all-MiniLM-L6-v2 HF directory")
	work      = flag.String("work", "", "with -figures: scratch directory for large files")
)

var man Manifest

func main() {
	flag.Parse()
	if *outDir == "" || *mantleBin == "" {
		must(fmt.Errorf("-out and -mantle-bin are required"))
	}
	bin, err := filepath.Abs(*mantleBin)
	must(err)
	*mantleBin = bin
	if *figures {
		runFigures()
		return
	}
	for _, d := range []string{"files", "values", "mutated", "hf"} {
		must(os.RemoveAll(filepath.Join(*outDir, d)))
		must(os.MkdirAll(filepath.Join(*outDir, d), 0o755))
	}
	man = Manifest{Format: 1, MantleCommit: *commit, GoVersion: runtime.Version(), GoExperiment: os.Getenv("GOEXPERIMENT"),
		Generator: "tools/mcf-fixtures (go run; see README)"}

	genPlain()
	genModelInfo()
	genAliasZero()
	genQuant()
	genSections()
	genHF()
	genMixed()
	genMutated()
	genRefusals()

	writeJSON(filepath.Join(*outDir, "manifest.json"), man)
	fmt.Printf("%d fixtures\n", len(man.Fixtures))
}

// add describes a fixture with mantle's reader and appends it to the manifest.
func add(rel, kind, madeBy string, covers []string, inputs map[string]any, mi any) *Fixture {
	path := filepath.Join(*outDir, rel)
	fmt.Fprintln(os.Stderr, "fixture", rel)
	data, err := os.ReadFile(path)
	must(err)
	v, h, s, t := describe(path, filepath.Join(*outDir, "values"), "values")
	f := Fixture{File: rel, Kind: kind, MadeBy: madeBy, Inputs: inputs, Covers: covers, Size: int64(len(data)),
		SHA256: sha256Hex(data), Mantle: v, Header: h, Sections: s, ModelInfo: mi, Tensors: t}
	man.Fixtures = append(man.Fixtures, f)
	return &man.Fixtures[len(man.Fixtures)-1]
}

func u64s(v ...uint64) []uint64 { return v }

// ---------------------------------------------------------------- plain dtypes

func genPlain() {
	r := rng(1)
	f32special := []float32{0, float32(math.Copysign(0, -1)), 1, -1.5, float32(math.NaN()), float32(math.Inf(1)),
		float32(math.Inf(-1)), math.Float32frombits(1), math.MaxFloat32, math.Float32frombits(0x7fa00001)}
	f16special := []uint16{0x0000, 0x8000, 0x0001, 0x03ff, 0x0400, 0x3c00, 0xc000, 0x7bff, 0x7c00, 0xfc00, 0x7e00, 0x7d01}
	bf16special := []uint16{0x0000, 0x8000, 0x0001, 0x3f80, 0xbfc0, 0x7f7f, 0x7f80, 0xff80, 0x7fc0, 0x7f81}
	var f64b []byte
	for _, v := range []float64{1.5, -2.25, math.NaN(), math.SmallestNonzeroFloat64, 1e300} {
		f64b = append(f64b, le64b(math.Float64bits(v))...)
	}
	i8 := []byte{0x80, 0xff, 0x00, 0x01, 0x7f, 0x2a}
	u8 := []byte{0, 1, 127, 128, 254, 255}
	var i16, u16, i32, u32, i64, u64 []byte
	for _, v := range []int16{math.MinInt16, -1, 0, 1, math.MaxInt16, 12345} {
		i16 = append(i16, byte(v), byte(uint16(v)>>8))
	}
	for _, v := range []uint16{0, 1, 0x7fff, 0x8000, 0xfffe, 0xffff} {
		u16 = append(u16, byte(v), byte(v>>8))
	}
	for _, v := range []int32{math.MinInt32, -1, 0, 1, math.MaxInt32, 16777217} {
		i32 = append(i32, le32b(uint32(v))...)
	}
	for _, v := range []uint32{0, 1, 0x7fffffff, 0x80000000, 16777217, 0xffffffff} {
		u32 = append(u32, le32b(v)...)
	}
	for _, v := range []int64{math.MinInt64, -1, 0, 1, math.MaxInt64, 9007199254740993} {
		i64 = append(i64, le64b(uint64(v))...)
	}
	for _, v := range []uint64{0, 1, 1 << 53, 1<<53 + 1, 1 << 63, math.MaxUint64} {
		u64 = append(u64, le64b(v)...)
	}
	ts := []tensorSpec{
		{Name: "bf16.special", DType: mcf.DTypeBF16, Shape: u64s(10), Data: u16Bytes(bf16special)},
		{Name: "f16.rank4", DType: mcf.DTypeF16, Shape: u64s(1, 2, 2, 3), Data: f32ToF16Bytes(gauss(r, 12, 1))},
		{Name: "f16.special", DType: mcf.DTypeF16, Shape: u64s(12), Data: u16Bytes(f16special)},
		{Name: "f32.rank3", DType: mcf.DTypeF32, Shape: u64s(2, 3, 4), Data: f32Bytes(gauss(r, 24, 1))},
		{Name: "f32.special", DType: mcf.DTypeF32, Shape: u64s(2, 5), Data: f32Bytes(f32special)},
		{Name: "f64.values", DType: mcf.DTypeF64, Shape: u64s(5), Data: f64b},
		{Name: "i16.values", DType: mcf.DTypeI16, Shape: u64s(2, 3), Data: i16},
		{Name: "i32.values", DType: mcf.DTypeI32, Shape: u64s(3, 2), Data: i32},
		{Name: "i64.values", DType: mcf.DTypeI64, Shape: u64s(6), Data: i64},
		{Name: "i8.values", DType: mcf.DTypeI8, Shape: u64s(2, 3), Data: i8},
		{Name: "scalar.f32", DType: mcf.DTypeF32, Shape: nil, Data: f32Bytes([]float32{3.25})},
		{Name: "u16.values", DType: mcf.DTypeU16, Shape: u64s(6), Data: u16},
		{Name: "u32.values", DType: mcf.DTypeU32, Shape: u64s(6), Data: u32},
		{Name: "u64.values", DType: mcf.DTypeU64, Shape: u64s(6), Data: u64},
		{Name: "u8.values", DType: mcf.DTypeU8, Shape: u64s(6), Data: u8},
	}
	writeWithWriter(filepath.Join(*outDir, "files/plain_dtypes.mcf"), mcfSpec{Tensors: ts, Flags: mcf.FlagTensorDataAligned64})
	add("files/plain_dtypes.mcf", "writer",
		"pkg/mcf Writer: NewWriter, AddFlags(FlagTensorDataAligned64), BeginSection(TensorData,1) with Align(64) before each tensor, EncodeTensorIndexSection + WriteSection(TensorIndex,1), Finalise",
		[]string{"every plain dtype 1-12", "rank 0 (scalar), 1, 2, 3, 4", "f32/f16/bf16 specials: +-0, NaN payloads, +-Inf, subnormals, max", "integer extremes", "no ModelInfo section"},
		nil, nil)
}

func le32b(v uint32) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)} }
func le64b(v uint64) []byte { return append(le32b(uint32(v)), le32b(uint32(v>>32))...) }

// ---------------------------------------------------------------- ModelInfo

type kvJSON struct {
	Key       string  `json:"key"`
	Type      int     `json:"type"`
	U32       *uint32 `json:"u32,omitempty"`
	F32       *string `json:"f32_bits,omitempty"`
	StringHex *string `json:"string_hex,omitempty"`
	ValueOff0 bool    `json:"value_off_zero,omitempty"`
}

// modelInfoJSON gives the fields mantle was asked to write (mantle has no
// ModelInfo reader: these are the inputs of EncodeModelInfo, in the order
// and types it writes them).
func modelInfoJSON(mi *mcf.ModelInfo) map[string]any {
	out := map[string]any{
		"arch": uint32(mi.Arch), "vocab_size": mi.VocabSize, "hidden_size": mi.HiddenSize, "layer_count": mi.LayerCount,
		"head_count": mi.HeadCount, "head_count_kv": mi.HeadCountKV, "context_length": mi.ContextLength,
		"train_context": mi.TrainContext, "rope_type": uint32(mi.RopeType),
		"rope_freq_base_bits": f32Bits(mi.RopeFreqBase), "rope_scale_bits": f32Bits(mi.RopeScale),
		"model_name": mi.ModelName, "base_model": mi.BaseModel,
	}
	keys := []string{}
	for k, v := range mi.Extras {
		if v != nil {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	kvs := []kvJSON{}
	for _, k := range keys {
		kv := kvJSON{Key: k}
		switch v := mi.Extras[k].(type) {
		case string:
			h := fmt.Sprintf("%x", v)
			kv.Type, kv.StringHex, kv.ValueOff0 = 3, &h, v == ""
		case []byte:
			h := fmt.Sprintf("%x", v)
			kv.Type, kv.StringHex = 3, &h
		case uint32:
			kv.Type, kv.U32 = 1, &v
		case uint64:
			x := uint32(v)
			kv.Type, kv.U32 = 1, &x
		case int:
			x := uint32(v)
			kv.Type, kv.U32 = 1, &x
		case int32:
			x := uint32(v)
			kv.Type, kv.U32 = 1, &x
		case float32:
			b := f32Bits(v)
			kv.Type, kv.F32 = 2, &b
		case float64:
			b := f32Bits(float32(v))
			kv.Type, kv.F32 = 2, &b
		}
		kvs = append(kvs, kv)
	}
	out["kv"] = kvs
	return out
}

func oneTensor() []tensorSpec {
	return []tensorSpec{{Name: "w", DType: mcf.DTypeF32, Shape: u64s(2, 2), Data: f32Bytes([]float32{1, 2, 3, 4})}}
}

func genModelInfo() {
	full := &mcf.ModelInfo{
		Arch: mcf.ArchGranite, ModelName: "tiny-模型 🙂", BaseModel: "base/model-v1",
		VocabSize: 32000, HiddenSize: 4096, LayerCount: 32, HeadCount: 32, HeadCountKV: 8,
		ContextLength: 8192, TrainContext: 4096, RopeType: mcf.RopeYarn, RopeFreqBase: 500000, RopeScale: 0.25,
		Extras: map[string]any{
			"str.plain": "hello", "str.empty": "", "str.unicode": "naïve — ✓", "bytes.raw": []byte{0, 1, 0xff, 'x'},
			"bytes.empty": []byte{}, "u32": uint32(4294967295), "u64.small": uint64(7), "int": 12, "int32": int32(5),
			"f32": float32(-1.5e-7), "f64": 3.141592653589793, "nil.skipped": nil, "a.first": "sorted first",
		},
	}
	writeWithWriter(filepath.Join(*outDir, "files/modelinfo_full.mcf"), mcfSpec{ModelInfo: full, Tensors: oneTensor(), Flags: mcf.FlagTensorDataAligned64})
	add("files/modelinfo_full.mcf", "writer", "pkg/mcf EncodeModelInfo (every field set) + WriteSection(ModelInfo,1), then one f32 tensor as in plain_dtypes",
		[]string{"ModelInfo: every fixed field, arch granite (5, never written by pack), rope yarn, unicode model name, base model",
			"KV extras of every Go type EncodeModelInfo accepts: string, empty string (value_off 0), []byte, empty []byte (a 0-length blob, value_off != 0), uint32, uint64, int, int32 (type 1), float32, float64 (type 2); nil skipped; keys sorted"},
		nil, modelInfoJSON(full))

	empty := &mcf.ModelInfo{}
	writeWithWriter(filepath.Join(*outDir, "files/modelinfo_empty.mcf"), mcfSpec{ModelInfo: empty, Tensors: oneTensor(), Flags: mcf.FlagTensorDataAligned64})
	add("files/modelinfo_empty.mcf", "writer", "pkg/mcf EncodeModelInfo(&ModelInfo{}) + WriteSection(ModelInfo,1), one f32 tensor",
		[]string{"ModelInfo with every field zero: names absent (offset 0), kv_count 0, kv_off = section size"}, nil, modelInfoJSON(empty))
}

// ---------------------------------------------------------------- aliasing, zero-size dims, unicode

func genAliasZero() {
	a := f32Bytes([]float32{1, -2, 3.5, 0})
	ts := []tensorSpec{
		{Name: "alias.a", DType: mcf.DTypeF32, Shape: u64s(2, 2), Data: a},
		{Name: "alias.b", DType: mcf.DTypeF32, Shape: u64s(2, 2), AliasOf: "alias.a"},
		{Name: "alias.c_u8_view", DType: mcf.DTypeU8, Shape: u64s(16), AliasOf: "alias.a"},
		{Name: "empty.0", DType: mcf.DTypeF32, Shape: u64s(0), Data: nil},
		{Name: "empty.0x4x2", DType: mcf.DTypeI32, Shape: u64s(0, 4, 2), Data: nil},
		{Name: "empty.3x0", DType: mcf.DTypeF16, Shape: u64s(3, 0), Data: nil},
		{Name: "z\uffff", DType: mcf.DTypeI32, Shape: u64s(2), Data: append(le32b(1), le32b(2)...)},
		{Name: "z\U0001F642", DType: mcf.DTypeI32, Shape: u64s(2), Data: append(le32b(3), le32b(4)...)},
		{Name: "Ünïcode.名前", DType: mcf.DTypeF32, Shape: u64s(3), Data: f32Bytes([]float32{0.5, 0.25, 0.125})},
	}
	writeWithWriter(filepath.Join(*outDir, "files/alias_zero_unicode.mcf"), mcfSpec{Tensors: ts, Flags: mcf.FlagTensorDataAligned64})
	add("files/alias_zero_unicode.mcf", "writer", "pkg/mcf Writer; aliases are TensorIndexRecords that repeat an earlier tensor's DataOff/DataSize (as pack's dedup does)",
		[]string{"aliased payloads: same dtype+shape (as pack --dedup) and a u8 view of the same bytes",
			"zero-size dims [0], [3,0], [0,4,2] with data_size 0 (mantle's Writer writes them, its reader refuses them: f32_error)",
			"unicode names; byte order differs from UTF-16 order (z\\uffff < z\\U0001F642 bytewise)"},
		nil, nil)
}

// ---------------------------------------------------------------- quantize

var quantMethods = []string{"q8", "q4", "k6", "k4", "k3", "k2"}

func quantInputTensors() []tensorSpec {
	r := rng(2)
	zeros := gauss(r, 4*96, 1)
	for i := 96; i < 192; i++ { // row 1 all zero
		zeros[i] = 0
	}
	for i := 64; i < 96; i++ { // block 2 of row 0 zero
		zeros[i] = 0
	}
	outlier := gauss(r, 2*256, 0.02)
	outlier[37] = 50
	outlier[300] = -3
	tiny := gauss(r, 2*64, 1e-4)
	mixedScale := gauss(r, 2*600, 1)
	for i := 32; i < 64; i++ { // a block much smaller than its super-block: u6 near 1
		mixedScale[i] *= 0.01
	}
	return []tensorSpec{
		{Name: "bias.1d", DType: mcf.DTypeF32, Shape: u64s(40), Data: f32Bytes(gauss(r, 40, 1))},
		{Name: "blk.bf16", DType: mcf.DTypeBF16, Shape: u64s(2, 70), Data: f32ToBF16Bytes(gauss(r, 140, 1))},
		{Name: "blk.exact", DType: mcf.DTypeF32, Shape: u64s(2, 512), Data: f32Bytes(gauss(r, 1024, 1))},
		{Name: "blk.f16", DType: mcf.DTypeF16, Shape: u64s(2, 70), Data: f32ToF16Bytes(gauss(r, 140, 1))},
		{Name: "blk.mixed_scale", DType: mcf.DTypeF32, Shape: u64s(2, 600), Data: f32Bytes(mixedScale)},
		{Name: "blk.multi_super", DType: mcf.DTypeF32, Shape: u64s(4, 600), Data: f32Bytes(gauss(r, 2400, 1))},
		{Name: "blk.outlier", DType: mcf.DTypeF32, Shape: u64s(2, 256), Data: f32Bytes(outlier)},
		{Name: "blk.partial", DType: mcf.DTypeF32, Shape: u64s(3, 40), Data: f32Bytes(gauss(r, 120, 1))},
		{Name: "blk.single", DType: mcf.DTypeF32, Shape: u64s(1, 1), Data: f32Bytes([]float32{-0.75})},
		{Name: "blk.tiny", DType: mcf.DTypeF32, Shape: u64s(2, 64), Data: f32Bytes(tiny)},
		{Name: "blk.zeros", DType: mcf.DTypeF32, Shape: u64s(4, 96), Data: f32Bytes(zeros)},
		{Name: "gauss.wide", DType: mcf.DTypeF32, Shape: u64s(8, 1000), Data: f32Bytes(gauss(r, 8000, 1))},
		{Name: "ids.i32", DType: mcf.DTypeI32, Shape: u64s(2, 3), Data: append(append(le32b(1), le32b(2)...), append(append(le32b(3), le32b(4)...), append(le32b(5), le32b(6)...)...)...)},
		{Name: "rank3.f32", DType: mcf.DTypeF32, Shape: u64s(2, 2, 8), Data: f32Bytes(gauss(r, 32, 1))},
		{Name: "zeros.all", DType: mcf.DTypeF32, Shape: u64s(2, 40), Data: f32Bytes(make([]float32, 80))},
	}
}

func quantEdgeTensors() []tensorSpec {
	r := rng(3)
	huge := gauss(r, 64, 1)
	huge[5] = 2e7 // maxabs/qmax > 65504: mantle's f16 scale becomes +Inf
	sub := gauss(r, 64, 1e-6)
	boundary := make([]float32, 64) // q8 scale just above / below 2^-14 (f16 min normal)
	for i := range boundary {
		boundary[i] = float32(i%7-3) * 0.0005
	}
	boundary[0] = 127 * float32(math.Ldexp(1, -14)) * 1.001
	boundary[32] = 127 * float32(math.Ldexp(1, -14)) * 0.999
	halfway := make([]float32, 64) // values exactly at code+0.5 for qmax=7 and 127
	for i := range halfway {
		halfway[i] = float32(i%15-7) + 0.5
	}
	halfway[0], halfway[32] = 7, 127
	return []tensorSpec{
		{Name: "edge.boundary", DType: mcf.DTypeF32, Shape: u64s(2, 32), Data: f32Bytes(boundary)},
		{Name: "edge.halfway", DType: mcf.DTypeF32, Shape: u64s(2, 32), Data: f32Bytes(halfway)},
		{Name: "edge.huge", DType: mcf.DTypeF32, Shape: u64s(2, 32), Data: f32Bytes(huge)},
		{Name: "edge.subnormal_scale", DType: mcf.DTypeF32, Shape: u64s(2, 32), Data: f32Bytes(sub)},
	}
}

func quantInputModelInfo() *mcf.ModelInfo {
	return &mcf.ModelInfo{Arch: mcf.ArchLLaMA, ModelName: "quant-input", VocabSize: 8, HiddenSize: 40, LayerCount: 1,
		HeadCount: 1, HeadCountKV: 1, ContextLength: 16, RopeFreqBase: 10000, Extras: map[string]any{"purpose": "quantize input"}}
}

func genQuant() {
	cfg := []byte(`{"model_type": "llama", "hidden_size": 40}` + "\n")
	writeWithWriter(filepath.Join(*outDir, "files/quant_input.mcf"), mcfSpec{
		Sections:  []sectionSpec{{mcf.SectionHFConfigJSON, 1, cfg}},
		ModelInfo: quantInputModelInfo(), Tensors: quantInputTensors(), Flags: mcf.FlagTensorDataAligned64})
	add("files/quant_input.mcf", "writer", "pkg/mcf Writer: config.json section, ModelInfo, f32/f16/bf16/i32 tensors (inputs of the quantize fixtures)",
		[]string{"quantize input: partial blocks (cols 40, 70, 600), several super-blocks per row (600 cols = 19 blocks = 3 super-blocks, last partial), exact super-blocks (512), all-zero blocks/rows/tensor, outliers, tiny values, a block much smaller than its super-block, f16/bf16 inputs, 1-D and 3-D (copied), i32 (copied)"},
		nil, modelInfoJSON(quantInputModelInfo()))
	writeWithWriter(filepath.Join(*outDir, "files/quant_edge_input.mcf"), mcfSpec{Tensors: quantEdgeTensors(), Flags: mcf.FlagTensorDataAligned64})
	add("files/quant_edge_input.mcf", "writer", "pkg/mcf Writer: f32 edge-case tensors (input of quant_edge_*)",
		[]string{"quantize edge input: scale overflowing f16 (+Inf scale), scales below f16 normal range (truncated to 0 / flushed), q8 scale straddling 2^-14, values exactly halfway between codes"},
		nil, nil)

	for _, m := range quantMethods {
		out := "files/quant_" + m + ".mcf"
		cmd := runMantle(*mantleBin, *outDir, "quantize", "--input", "files/quant_input.mcf", "--output", out, "--method", m)
		add(out, "quantize", cmd, []string{"mantle quantize " + m + " (default clip = +-maxabs of each tensor)"},
			map[string]any{"input": "files/quant_input.mcf", "method": m}, modelInfoJSON(quantInputModelInfo()))
		out = "files/quant_" + m + "_clip.mcf"
		cmd = runMantle(*mantleBin, *outDir, "quantize", "--input", "files/quant_input.mcf", "--output", out, "--method", m, "--min-clip", "-0.5", "--max-clip", "0.75")
		add(out, "quantize", cmd, []string{"mantle quantize " + m + " with an asymmetric clip range [-0.5, 0.75] (values clamped, range stored in every record)"},
			map[string]any{"input": "files/quant_input.mcf", "method": m, "min_clip": -0.5, "max_clip": 0.75}, modelInfoJSON(quantInputModelInfo()))
		out = "files/quant_edge_" + m + ".mcf"
		cmd = runMantle(*mantleBin, *outDir, "quantize", "--input", "files/quant_edge_input.mcf", "--output", out, "--method", m)
		add(out, "quantize", cmd, []string{"mantle quantize " + m + " on the edge input"},
			map[string]any{"input": "files/quant_edge_input.mcf", "method": m}, nil)
	}
}

// ---------------------------------------------------------------- every section type

func genSections() {
	secs := []sectionSpec{
		{mcf.SectionHFConfigJSON, 1, []byte("{\n  \"model_type\": \"llama\",\n  \"vocab_size\": 8\n}\n")},
		{mcf.SectionHFGenerationConfigJSON, 1, []byte(`{"bos_token_id": 1, "eos_token_id": 2}`)},
		{mcf.SectionTokenizerJSON, 1, []byte(`{"version": "1.0", "model": {"type": "BPE", "vocab": {"a": 0, "é": 1}, "merges": []}}`)},
		{mcf.SectionTokenizerConfigJSON, 1, []byte(`{"chat_template": "{{ messages }}", "model_max_length": 16}`)},
		{mcf.SectionVocabJSON, 1, []byte(`{"a": 0, "\u00e9": 1, "ab": 2}`)},
		{mcf.SectionMergesTXT, 1, []byte("#version: 0.2\na b\né a")}, // no trailing newline, 3 bytes short of 8-alignment
	}
	mi := quantInputModelInfo()
	ts := quantInputTensors()[:3]
	writeWithWriter(filepath.Join(*outDir, "files/sections_in.mcf"), mcfSpec{Sections: secs, ModelInfo: mi, Tensors: ts, Flags: mcf.FlagTensorDataAligned64})
	add("files/sections_in.mcf", "writer", "pkg/mcf Writer: the six HF sections (0x0100-0x0105) + ModelInfo + 3 tensors",
		[]string{"every HF section type, bytes verbatim, section sizes not multiples of 8"}, nil, modelInfoJSON(mi))
	cmd := runMantle(*mantleBin, *outDir, "quantize", "--input", "files/sections_in.mcf", "--output", "files/sections_all.mcf", "--method", "q8")
	add("files/sections_all.mcf", "quantize", cmd, []string{"all 10 section types of the seed in one file (quantize copies the others, adds QuantInfo)"},
		map[string]any{"input": "files/sections_in.mcf", "method": "q8"}, modelInfoJSON(mi))

	other := []sectionSpec{
		{mcf.SectionType(0x0200), 3, []byte("unknown section payload")},
		{mcf.SectionVocabJSON, 1, nil},
		{mcf.SectionType(0x8001), 0, []byte{1, 2, 3, 4, 5, 6, 7, 8}},
	}
	writeWithWriter(filepath.Join(*outDir, "files/unknown_sections.mcf"), mcfSpec{Sections: other, Tensors: oneTensor(), Flags: mcf.FlagTensorDataAligned64})
	add("files/unknown_sections.mcf", "writer", "pkg/mcf Writer: WriteSection with types 0x0200 (version 3) and 0x8001 (version 0), and an empty vocab.json section",
		[]string{"unknown section types (readers ignore them)", "a zero-size section"}, nil, nil)

	writeWithWriter(filepath.Join(*outDir, "files/no_tensors.mcf"), mcfSpec{Sections: secs[:1], ModelInfo: mi})
	add("files/no_tensors.mcf", "writer", "pkg/mcf Writer: config.json + ModelInfo only, no TensorIndex/TensorData",
		[]string{"a file without tensors: mcf.Open accepts it, mcfstore refuses it (no tensor index)"}, nil, modelInfoJSON(mi))
}

// ---------------------------------------------------------------- Hugging Face directories + pack

func genHF() {
	r := rng(4)
	dir := filepath.Join(*outDir, "hf", "tiny-llama")
	must(os.MkdirAll(dir, 0o755))
	files := map[string]string{
		"config.json": `{
  "architectures": ["LlamaForCausalLM"],
  "model_type": "llama",
  "vocab_size": 32,
  "hidden_size": 16,
  "intermediate_size": 32,
  "num_hidden_layers": 2,
  "num_attention_heads": 4,
  "num_key_value_heads": 2,
  "max_position_embeddings": 128,
  "rope_theta": 10000.0,
  "rope_scaling": {"type": "linear", "factor": 2.0},
  "rms_norm_eps": 1e-06,
  "torch_dtype": "float32"
}
`,
		"generation_config.json": "{\"bos_token_id\": 1, \"eos_token_id\": 2}\n",
		"tokenizer.json":         `{"version":"1.0","model":{"type":"BPE","vocab":{"<s>":0,"</s>":1,"a":2,"b":3,"ab":4,"é":5},"merges":["a b"]}}`,
		"tokenizer_config.json":  "{\n  \"bos_token\": \"<s>\",\n  \"chat_template\": \"{% for m in messages %}{{ m.content }}{% endfor %}\"\n}\n",
		"vocab.json":             `{"<s>":0,"</s>":1,"a":2,"b":3,"ab":4,"é":5}`,
		"merges.txt":             "#version: 0.2\na b\n",
		"chat_template.jinja":    "ignored: tokenizer_config.json already has a chat_template\n",
	}
	for n, c := range files {
		must(os.WriteFile(filepath.Join(dir, n), []byte(c), 0o644))
	}
	emb := f32Bytes(gauss(r, 32*16, 0.02))
	q := f32ToBF16Bytes(gauss(r, 16*16, 0.1))
	same := f32Bytes(gauss(r, 16, 1))
	var pos []byte
	for i := 0; i < 8; i++ {
		pos = append(pos, le64b(uint64(i))...)
	}
	tiny := []stTensor{
		{"model.embed_tokens.weight", "F32", []int64{32, 16}, emb},
		{"lm_head.weight", "F32", []int64{32, 16}, emb}, // identical: pack --dedup aliases it
		{"model.layers.0.self_attn.q_proj.weight", "BF16", []int64{16, 16}, q},
		{"model.layers.1.self_attn.q_proj.weight", "BF16", []int64{16, 16}, q},
		{"model.layers.0.mlp.up_proj.weight", "F32", []int64{32, 16}, f32Bytes(gauss(r, 512, 0.05))},
		{"model.layers.0.mlp.down_proj.weight", "F16", []int64{16, 32}, f32ToF16Bytes(gauss(r, 512, 0.05))},
		{"model.norm.weight", "F16", []int64{16}, f32ToF16Bytes(gauss(r, 16, 1))},
		{"dup.shape_a", "F32", []int64{2, 8}, same}, // same bytes, other shape: not aliased
		{"dup.shape_b", "F32", []int64{4, 4}, same},
		{"position_ids", "I64", []int64{1, 8}, pos},
		{"attn.mask", "U8", []int64{8}, []byte{1, 1, 1, 0, 0, 1, 0, 1}},
		{"模型.嵌入.weight", "F32", []int64{4, 4}, f32Bytes(gauss(r, 16, 1))},
		{"café.bias", "F32", []int64{4}, f32Bytes(gauss(r, 4, 1))},
		{"scalar.temperature", "F32", []int64{}, f32Bytes([]float32{0.7})},
	}
	writeSafetensors(filepath.Join(dir, "model.safetensors"), tiny, map[string]string{"format": "pt"})

	packs := []struct {
		out    string
		args   []string
		covers string
	}{
		{"files/hf_tiny_llama.mcf", nil, "mantle pack defaults: resources, ModelInfo from config.json (llama, rope_scaling present), --dedup (aliases lm_head/embed and the two q_proj), 64-aligned tensors, unicode names, I64/U8/F16/BF16/F32, scalar"},
		{"files/hf_tiny_llama_nodedup.mcf", []string{"--dedup=false"}, "pack without dedup"},
		{"files/hf_tiny_llama_nores.mcf", []string{"--no-resources"}, "pack --no-resources: only ModelInfo, TensorData, TensorIndex"},
		{"files/hf_tiny_llama_align0.mcf", []string{"--tensor-align", "0"}, "pack --tensor-align 0: tensors packed back to back, header flag bit0 clear"},
		{"files/hf_tiny_llama_int8.mcf", []string{"--quant-embed", "int8"}, "pack --quant-embed int8: embedding tables as bare int8 codes (truncated toward zero, scale maxabs/127 not stored), no QuantInfo; mantle's reader refuses them"},
		{"files/hf_tiny_llama_int4.mcf", []string{"--quant-embed", "int4"}, "pack --quant-embed int4: bare offset-binary nibbles (q+8), no scale, no QuantInfo"},
	}
	for _, p := range packs {
		args := append([]string{"pack", "--input", "hf/tiny-llama", "--output", p.out}, p.args...)
		cmd := runMantle(*mantleBin, *outDir, args...)
		add(p.out, "pack", cmd, []string{p.covers}, map[string]any{"hf_dir": "hf/tiny-llama"}, checkedModelInfo(p.out, tinyMI))
	}
	for _, m := range quantMethods {
		out := "files/hf_tiny_llama_" + m + ".mcf"
		cmd := runMantle(*mantleBin, *outDir, "quantize", "--input", "files/hf_tiny_llama.mcf", "--output", out, "--method", m)
		add(out, "quantize", cmd, []string{"mantle quantize " + m + " of the packed tiny-llama (2-D f32/f16/bf16 quantized, the rest copied; dedup aliasing dropped)"},
			map[string]any{"input": "files/hf_tiny_llama.mcf", "method": m}, checkedModelInfo(out, tinyMI))
	}

	// sharded, qwen, chat_template.jinja merged into tokenizer_config.json by pack
	dir = filepath.Join(*outDir, "hf", "sharded-qwen")
	must(os.MkdirAll(dir, 0o755))
	files = map[string]string{
		"config.json":           `{"model_type": "qwen2", "vocab_size": 64, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 256, "rope_theta": 1000000.0}`,
		"tokenizer.json":        `{"version":"1.0","model":{"type":"BPE","vocab":{"x":0},"merges":[]}}`,
		"tokenizer_config.json": `{"eos_token": "<|im_end|>", "model_max_length": 256}`,
		"chat_template.jinja":   "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}\n",
	}
	for n, c := range files {
		must(os.WriteFile(filepath.Join(dir, n), []byte(c), 0o644))
	}
	castVals := gauss(r, 64, 1)
	castVals[0] = float32(math.NaN())
	castVals[1] = math.Float32frombits(0x7f800001) // signalling NaN
	castVals[2] = 1e-40                            // f32 subnormal
	castVals[3] = 3e-6                             // f16 subnormal range
	castVals[4] = 70000                            // overflows f16
	castVals[5] = 1.00048828125                    // halfway between two f16 values
	castVals[6] = math.Float32frombits(0x3f808000) // halfway between two bf16 values
	castVals[7] = float32(math.Inf(-1))
	castVals[8] = math.Float32frombits(0x7fffffff) // NaN with every payload bit set
	castVals[9] = math.Float32frombits(0xffc00000) // negative quiet NaN
	shard1 := []stTensor{
		{"model.embed_tokens.weight", "F32", []int64{64, 8}, f32Bytes(gauss(r, 512, 0.02))},
		{"model.cast_probe", "F32", []int64{8, 8}, f32Bytes(castVals)},
	}
	shard2 := []stTensor{
		{"model.layers.0.self_attn.k_proj.weight", "BF16", []int64{4, 8}, f32ToBF16Bytes(gauss(r, 32, 0.1))},
		{"model.layers.0.self_attn.v_proj.weight", "F16", []int64{4, 8}, f32ToF16Bytes(gauss(r, 32, 0.1))},
		{"model.norm.weight", "F32", []int64{8}, f32Bytes(gauss(r, 8, 1))},
	}
	writeSafetensors(filepath.Join(dir, "model-00001-of-00002.safetensors"), shard1, nil)
	writeSafetensors(filepath.Join(dir, "model-00002-of-00002.safetensors"), shard2, map[string]string{"format": "pt"})
	wm := map[string]string{}
	total := 0
	for _, t := range shard1 {
		wm[t.Name] = "model-00001-of-00002.safetensors"
		total += len(t.Data)
	}
	for _, t := range shard2 {
		wm[t.Name] = "model-00002-of-00002.safetensors"
		total += len(t.Data)
	}
	writeJSON(filepath.Join(dir, "model.safetensors.index.json"), map[string]any{"metadata": map[string]any{"total_size": total}, "weight_map": wm})
	for _, p := range []struct {
		out, cast, covers string
	}{
		{"files/hf_sharded_qwen.mcf", "", "pack of a sharded directory (index.json), qwen2 -> arch qwen, no rope_scaling, chat_template.jinja merged into tokenizer_config.json (re-serialised by Go's json.Marshal: keys sorted, compact)"},
		{"files/hf_sharded_qwen_f16.mcf", "f16", "pack --cast f16: f32 and bf16 to f16 (round to nearest even; f32 subnormals -> 0; overflow -> Inf; NaN -> 0x7e00)"},
		{"files/hf_sharded_qwen_bf16.mcf", "bf16", "pack --cast bf16: f32 and f16 to bf16 (NaN handling as mantle does it)"},
	} {
		args := []string{"pack", "--input", "hf/sharded-qwen", "--output", p.out}
		if p.cast != "" {
			args = append(args, "--cast", p.cast)
		}
		cmd := runMantle(*mantleBin, *outDir, args...)
		add(p.out, "pack", cmd, []string{p.covers}, map[string]any{"hf_dir": "hf/sharded-qwen"}, checkedModelInfo(p.out, qwenMI))
	}
}

// ---------------------------------------------------------------- one file with every quantized family

// genMixed copies payloads and records that mantle's quantize wrote into one
// file (pkg/mcf Writer): every family side by side, plus plain tensors.
func genMixed() {
	var ts []tensorSpec
	quant := map[string]mcf.QuantRecord{}
	for _, m := range quantMethods {
		path := filepath.Join(*outDir, "files/quant_"+m+".mcf")
		mf, err := mcf.Open(path)
		must(err)
		idx, err := mcf.ParseTensorIndexSection(mf.SectionData(mf.Section(mcf.SectionTensorIndex)))
		must(err)
		qi, err := mcf.ParseQuantInfoSection(mf.SectionData(mf.Section(mcf.SectionQuantInfo)))
		must(err)
		want := "blk.partial"
		if m == "k4" || m == "k2" {
			want = "blk.multi_super"
		}
		i, ok := idx.Find(want)
		if !ok {
			must(fmt.Errorf("%s: no %s", path, want))
		}
		e, _ := idx.Entry(i)
		shape, _ := idx.Shape(i)
		name := m + "." + want
		ts = append(ts, tensorSpec{Name: name, DType: e.DType, Shape: shape, Data: append([]byte(nil), mf.Data[e.DataOff:e.DataOff+e.DataSize]...)})
		for _, r := range qi.Records() {
			if int(r.TensorIndex) == i {
				quant[name] = r
			}
		}
		mf.Close()
	}
	ts = append(ts, tensorSpec{Name: "plain.bias", DType: mcf.DTypeF32, Shape: u64s(40), Data: f32Bytes(gauss(rng(5), 40, 1))})
	sort.Slice(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
	mi := quantInputModelInfo()
	writeWithWriter(filepath.Join(*outDir, "files/mixed_quant.mcf"), mcfSpec{
		Sections:  []sectionSpec{{mcf.SectionHFConfigJSON, 1, []byte(`{"model_type": "llama"}`)}},
		ModelInfo: mi, Tensors: ts, Quant: quant, Flags: mcf.FlagTensorDataAligned64})
	add("files/mixed_quant.mcf", "writer", "pkg/mcf Writer with payloads and QuantRecords copied from files/quant_<m>.mcf (mantle quantize output): one tensor of each family + one f32",
		[]string{"every quantized family in one file, QuantInfo records only for the quantized tensors (record.tensor_index = name-sorted position)", "base of the mutated files"},
		nil, modelInfoJSON(mi))
}

func genRefusals() {
	qnan := filepath.Join(*outDir, "files/quant_nan_input.mcf")
	writeWithWriter(qnan, mcfSpec{Tensors: []tensorSpec{{Name: "w", DType: mcf.DTypeF32, Shape: u64s(2, 2), Data: f32Bytes([]float32{1, float32(math.NaN()), 2, 3})}}, Flags: mcf.FlagTensorDataAligned64})
	add("files/quant_nan_input.mcf", "writer", "pkg/mcf Writer: one 2x2 f32 tensor holding a NaN", []string{"mantle quantize refuses it (see refusals)"}, nil, nil)
	for _, args := range [][]string{
		{"pack", "--input", "hf/tiny-llama", "--output", "refused.mcf", "--cast", "f16"},
		{"pack", "--input", "hf/tiny-llama", "--output", "refused.mcf", "--cast", "bf16"},
		{"quantize", "--input", "files/quant_nan_input.mcf", "--output", "refused.mcf", "--method", "q8"},
		{"quantize", "--input", "files/quant_q8.mcf", "--output", "refused.mcf", "--method", "k4"},
		{"quantize", "--input", "files/quant_input.mcf", "--output", "refused.mcf", "--method", "int8"},
		{"quantize", "--input", "files/quant_input.mcf", "--output", "refused.mcf", "--method", "int4"},
		{"quantize", "--input", "files/quant_input.mcf", "--output", "refused.mcf", "--method", "q8", "--min-clip", "1", "--max-clip", "-1"},
	} {
		cmd := exec.Command(*mantleBin, append([]string{"--log-level", "error"}, args...)...)
		cmd.Dir = *outDir
		out, err := cmd.CombinedOutput()
		os.Remove(filepath.Join(*outDir, "refused.mcf"))
		if err == nil {
			must(fmt.Errorf("mantle %s: expected a refusal", strings.Join(args, " ")))
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		man.Refusals = append(man.Refusals, Refusal{"mantle " + strings.Join(args, " "), strings.TrimSpace(lines[len(lines)-1])})
	}
}

// What pack puts in ModelInfo for the two HF directories (read from
// loadModelInfoFromHFConfig). checkedModelInfo proves it: mantle's own
// EncodeModelInfo of this struct must give the ModelInfo section's bytes.
var tinyMI = &mcf.ModelInfo{Arch: mcf.ArchLLaMA, ModelName: "tiny-llama", VocabSize: 32, HiddenSize: 16, LayerCount: 2,
	HeadCount: 4, HeadCountKV: 2, ContextLength: 128, RopeFreqBase: 10000,
	Extras: map[string]any{"hf.model_type": "llama", "hf.rope_scaling": "present", "hf.config_json_present": uint32(1)}}

var qwenMI = &mcf.ModelInfo{Arch: mcf.ArchQwen, ModelName: "sharded-qwen", VocabSize: 64, HiddenSize: 8, LayerCount: 1,
	HeadCount: 2, HeadCountKV: 1, ContextLength: 256, RopeFreqBase: 1000000,
	Extras: map[string]any{"hf.model_type": "qwen2", "hf.config_json_present": uint32(1)}}

func checkedModelInfo(rel string, mi *mcf.ModelInfo) any {
	want, err := mcf.EncodeModelInfo(mi)
	must(err)
	mf, err := mcf.Open(filepath.Join(*outDir, rel))
	must(err)
	defer mf.Close()
	got := mf.SectionData(mf.Section(mcf.SectionModelInfo))
	if string(got) != string(want) {
		must(fmt.Errorf("%s: ModelInfo is not EncodeModelInfo(%+v)", rel, *mi))
	}
	return modelInfoJSON(mi)
}
