package main

// Small helpers of the fixture generator: deterministic random data, float
// conversions for building inputs, a safetensors file writer, JSON output.

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
)

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcf-fixtures:", err)
		os.Exit(1)
	}
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func f32Bits(v float32) string { return fmt.Sprintf("0x%08x", math.Float32bits(v)) }

// rng returns a deterministic generator for a named stream.
func rng(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x6d636667656e)) }

func gauss(r *rand.Rand, n int, sigma float64) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(r.NormFloat64() * sigma)
	}
	return out
}

func f32Bytes(v []float32) []byte {
	out := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(x))
	}
	return out
}

func bytesF32(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// f16 with round to nearest even, subnormals kept (used only to build inputs).
func toF16(f float32) uint16 {
	u := math.Float32bits(f)
	sign := uint16(u>>16) & 0x8000
	exp := int(u>>23) & 0xFF
	frac := u & 0x7FFFFF
	if exp == 0xFF {
		if frac != 0 {
			return sign | 0x7E00
		}
		return sign | 0x7C00
	}
	e := exp - 127 + 15
	if e >= 31 {
		return sign | 0x7C00
	}
	if e <= 0 {
		if e < -10 {
			return sign
		}
		m := frac | 0x800000
		shift := uint32(14 - e)
		half := uint32(1) << (shift - 1)
		r := m & ((1 << shift) - 1)
		q := m >> shift
		if r > half || (r == half && q&1 == 1) {
			q++
		}
		return sign | uint16(q)
	}
	q := frac >> 13
	r := frac & 0x1FFF
	if r > 0x1000 || (r == 0x1000 && q&1 == 1) {
		q++
	}
	return sign + uint16(e<<10) + uint16(q)
}

func toBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7FFFFFFF > 0x7F800000 {
		return uint16(u>>16) | 0x40
	}
	return uint16((u + 0x7FFF + ((u >> 16) & 1)) >> 16)
}

func u16Bytes(v []uint16) []byte {
	out := make([]byte, 2*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint16(out[2*i:], x)
	}
	return out
}

func f32ToF16Bytes(v []float32) []byte {
	h := make([]uint16, len(v))
	for i, x := range v {
		h[i] = toF16(x)
	}
	return u16Bytes(h)
}

func f32ToBF16Bytes(v []float32) []byte {
	h := make([]uint16, len(v))
	for i, x := range v {
		h[i] = toBF16(x)
	}
	return u16Bytes(h)
}

// stTensor is one tensor of a safetensors file written by writeSafetensors.
type stTensor struct {
	Name  string
	DType string // safetensors dtype string
	Shape []int64
	Data  []byte
}

// writeSafetensors writes a safetensors file: u64 header length, JSON header
// (keys sorted, padded with spaces to a multiple of 8), data in name order.
func writeSafetensors(path string, ts []stTensor, meta map[string]string) {
	sorted := append([]stTensor(nil), ts...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	hdr := map[string]any{}
	if meta != nil {
		hdr["__metadata__"] = meta
	}
	var off int64
	for _, t := range sorted {
		shape := t.Shape
		if shape == nil {
			shape = []int64{}
		}
		hdr[t.Name] = map[string]any{"dtype": t.DType, "shape": shape, "data_offsets": []int64{off, off + int64(len(t.Data))}}
		off += int64(len(t.Data))
	}
	hj, err := json.Marshal(hdr) // encoding/json sorts map keys
	must(err)
	for len(hj)%8 != 0 {
		hj = append(hj, ' ')
	}
	out := make([]byte, 8, 8+len(hj)+int(off))
	binary.LittleEndian.PutUint64(out, uint64(len(hj)))
	out = append(out, hj...)
	for _, t := range sorted {
		out = append(out, t.Data...)
	}
	must(os.MkdirAll(filepath.Dir(path), 0o755))
	must(os.WriteFile(path, out, 0o644))
}

func writeJSON(path string, v any) {
	b, err := json.MarshalIndent(v, "", " ")
	must(err)
	b = append(b, '\n')
	must(os.WriteFile(path, b, 0o644))
}
