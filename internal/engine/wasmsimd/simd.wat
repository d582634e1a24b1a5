;; simd.wat: engine.wasm's CPU kernels in WebAssembly SIMD128 (Go's wasm
;; backend has none), built into simd.wasm by wat2wasm (go generate
;; ./internal/engine/wasmsimd). The module owns no memory: it imports engine.wasm's
;; ("engine" "memory") and reads and writes the Go slices the engine
;; passes by address. Addresses and strides are in bytes.
;;
;; Every product follows the order of internal/engine/internal/cpu/kernel.go, so
;; each kernel gives the bits of its Go twin: sixteen float32 lanes held in
;; four v128 accumulators (lanes 0-3, 4-7, 8-11, 12-15), lane j mod 16 +=
;; w[j]*x[j] as f32x4.mul then f32x4.add (never a fused or relaxed
;; multiply-add), a last partial chunk padded with zero products, then the
;; tree: lane i += lane i+8, += lane i+4, += lane i+2, lane 0 += lane 1.
;; Weights are decoded as quant's and ggml's reference decoders do:
;; float32(code)*scale, exact for 4- and 8-bit codes and an f16 scale.
;;
;; Exports (all results written to memory):
;;   q4_rows(codes, ldc, scales, lds, groups, x, out, rows)
;;     out[r] = w_r · x for rows r < rows of quant's q4: per group of 32
;;     columns 16 code bytes at codes + r*ldc (column 2i in byte i's low
;;     nibble, 2i+1 in its high one, value nibble − 8) and an f16 scale at
;;     scales + r*lds; x holds 32*groups float32.
;;   q8_rows(...)  the same for quant's q8: 32 int8 codes per group.
;;   q4_decode(codes, ldc, scales, lds, groups, dst, ldd, rows)
;;     rows of quant's q4 (as q4_rows) decoded to float32, row r's
;;     32*groups values at dst + r*ldd, in row order (a row's last group
;;     may spill past ldd into the next row's place, which the next row
;;     then overwrites, as the engine's Go decoders do).
;;   q8_decode(...)  the same for quant's q8.
;;   q4_0_rows(rows, ldr, blocks, x, out, n), q8_0_rows(...)
;;     out[r] = w_r · x for rows r < n of ggml's Q4_0 (Q8_0), as
;;     ggml.Dequantize decodes them: blocks of 32 columns at rows + r*ldr.
;;   q4_0_decode(rows, ldr, blocks, dst, ldd, n), q8_0_decode(...)
;;     the rows decoded to float32, row r at dst + r*ldd.
;;   f32_rows(w, ldw, x, k, out, rows)
;;     out[r] = w_r · x for float32 rows of k values.
;;   tile4x4(w, ldw, x, ldx, k, acc, out, flags)
;;     cpu.tile4x4Go: the lanes of w_r · x_t (rows r, tokens t < 4) over k
;;     more columns in acc (16 tiles of 16 float32, tile 4r+t at
;;     acc + 64*(4r+t)), from zero when flags has 1, summed into
;;     out[4r+t] when flags has 2.
(module
  (import "engine" "memory" (memory 0))

  ;; A scale's f16 bits are widened as github.com/x448/float16 does (the
  ;; engine's reference decoders), exactly for every value: a finite
  ;; half's bits but the sign shifted into an f32's place, times 2^112
  ;; (the exponents' bias difference), which makes a subnormal half
  ;; normal, then the sign; $halfNaN gives the rest (infinities, and NaNs
  ;; quieted) without the sign.
  (func $halfNaN (param $h i32) (result i32)
    (i32.or
      (i32.or (i32.const 0x7f800000) (i32.shl (i32.and (local.get $h) (i32.const 0x3ff)) (i32.const 13)))
      (select (i32.const 0x400000) (i32.const 0)
        (i32.gt_u (i32.and (local.get $h) (i32.const 0x7fff)) (i32.const 0x7c00)))))

  ;; $reduce sums the sixteen lanes as the tree of kernel.go.
  (func $reduce (param $a0 v128) (param $a1 v128) (param $a2 v128) (param $a3 v128) (result f32)
    (local.set $a0 (f32x4.add (local.get $a0) (local.get $a2)))
    (local.set $a1 (f32x4.add (local.get $a1) (local.get $a3)))
    (local.set $a0 (f32x4.add (local.get $a0) (local.get $a1)))
    (local.set $a0 (f32x4.add (local.get $a0)
      (i8x16.shuffle 8 9 10 11 12 13 14 15 0 1 2 3 4 5 6 7 (local.get $a0) (local.get $a0))))
    (f32.add (f32x4.extract_lane 0 (local.get $a0)) (f32x4.extract_lane 1 (local.get $a0))))

  ;; $tail carries four lanes over the last partial chunk: lane i +=
  ;; w[i]*x[i] for i < n, += 0 (the padding's zero product) for the rest.
  ;; It reads no value past n.
  (func $tail (param $acc v128) (param $w i32) (param $x i32) (param $n i32) (result v128)
    (f32x4.replace_lane 0 (local.get $acc)
      (f32.add (f32x4.extract_lane 0 (local.get $acc))
        (if (result f32) (i32.gt_s (local.get $n) (i32.const 0))
          (then (f32.mul (f32.load (local.get $w)) (f32.load (local.get $x))))
          (else (f32.const 0)))))
    (local.set $acc)
    (f32x4.replace_lane 1 (local.get $acc)
      (f32.add (f32x4.extract_lane 1 (local.get $acc))
        (if (result f32) (i32.gt_s (local.get $n) (i32.const 1))
          (then (f32.mul (f32.load offset=4 (local.get $w)) (f32.load offset=4 (local.get $x))))
          (else (f32.const 0)))))
    (local.set $acc)
    (f32x4.replace_lane 2 (local.get $acc)
      (f32.add (f32x4.extract_lane 2 (local.get $acc))
        (if (result f32) (i32.gt_s (local.get $n) (i32.const 2))
          (then (f32.mul (f32.load offset=8 (local.get $w)) (f32.load offset=8 (local.get $x))))
          (else (f32.const 0)))))
    (local.set $acc)
    (f32x4.replace_lane 3 (local.get $acc)
      (f32.add (f32x4.extract_lane 3 (local.get $acc))
        (if (result f32) (i32.gt_s (local.get $n) (i32.const 3))
          (then (f32.mul (f32.load offset=12 (local.get $w)) (f32.load offset=12 (local.get $x))))
          (else (f32.const 0))))))

  ;; $dot is w · x over k float32 values.
  (func $dot (param $w i32) (param $x i32) (param $k i32) (result f32)
    (local $a0 v128) (local $a1 v128) (local $a2 v128) (local $a3 v128)
    (local $end i32) (local $n i32)
    (local.set $end (i32.add (local.get $w) (i32.shl (i32.and (local.get $k) (i32.const -16)) (i32.const 2))))
    (block $done
      (loop $chunk
        (br_if $done (i32.ge_u (local.get $w) (local.get $end)))
        (local.set $a0 (f32x4.add (local.get $a0) (f32x4.mul (v128.load (local.get $w)) (v128.load (local.get $x)))))
        (local.set $a1 (f32x4.add (local.get $a1) (f32x4.mul (v128.load offset=16 (local.get $w)) (v128.load offset=16 (local.get $x)))))
        (local.set $a2 (f32x4.add (local.get $a2) (f32x4.mul (v128.load offset=32 (local.get $w)) (v128.load offset=32 (local.get $x)))))
        (local.set $a3 (f32x4.add (local.get $a3) (f32x4.mul (v128.load offset=48 (local.get $w)) (v128.load offset=48 (local.get $x)))))
        (local.set $w (i32.add (local.get $w) (i32.const 64)))
        (local.set $x (i32.add (local.get $x) (i32.const 64)))
        (br $chunk)))
    (local.set $n (i32.and (local.get $k) (i32.const 15)))
    (if (local.get $n)
      (then
        (local.set $a0 (call $tail (local.get $a0) (local.get $w) (local.get $x) (local.get $n)))
        (local.set $a1 (call $tail (local.get $a1) (i32.add (local.get $w) (i32.const 16)) (i32.add (local.get $x) (i32.const 16)) (i32.sub (local.get $n) (i32.const 4))))
        (local.set $a2 (call $tail (local.get $a2) (i32.add (local.get $w) (i32.const 32)) (i32.add (local.get $x) (i32.const 32)) (i32.sub (local.get $n) (i32.const 8))))
        (local.set $a3 (call $tail (local.get $a3) (i32.add (local.get $w) (i32.const 48)) (i32.add (local.get $x) (i32.const 48)) (i32.sub (local.get $n) (i32.const 12))))))
    (call $reduce (local.get $a0) (local.get $a1) (local.get $a2) (local.get $a3)))

  (func (export "f32_rows") (param $w i32) (param $ldw i32) (param $x i32) (param $k i32) (param $out i32) (param $rows i32)
    (block $done
      (loop $row
        (br_if $done (i32.le_s (local.get $rows) (i32.const 0)))
        (f32.store (local.get $out) (call $dot (local.get $w) (local.get $x) (local.get $k)))
        (local.set $w (i32.add (local.get $w) (local.get $ldw)))
        (local.set $out (i32.add (local.get $out) (i32.const 4)))
        (local.set $rows (i32.sub (local.get $rows) (i32.const 1)))
        (br $row))))

  ;; $q4dot is one q4 row's product: groups of 16 code bytes at $c, f16
  ;; scales at $s, x at $x. Each four columns: their codes widened to
  ;; int32, converted, times the scale (exact), times x's, into their
  ;; lanes (written out: a call per four columns took 3.5 times as long
  ;; in V8).
  (func $q4dot (param $c i32) (param $s i32) (param $x i32) (param $groups i32) (result f32)
    (local $a0 v128) (local $a1 v128) (local $a2 v128) (local $a3 v128)
    (local $b v128) (local $lo v128) (local $hi v128) (local $v v128) (local $sc v128)
    (local $end i32) (local $h i32)
    (local.set $end (i32.add (local.get $c) (i32.shl (local.get $groups) (i32.const 4))))
    (block $done
      (loop $group
        (br_if $done (i32.ge_u (local.get $c) (local.get $end)))
        (local.set $h (i32.load16_u (local.get $s)))
        (local.set $sc (f32x4.splat (f32.reinterpret_i32
          (i32.or (i32.shl (i32.and (local.get $h) (i32.const 0x8000)) (i32.const 16))
            (if (result i32) (i32.ge_u (i32.and (local.get $h) (i32.const 0x7fff)) (i32.const 0x7c00))
              (then (call $halfNaN (local.get $h)))
              (else (i32.reinterpret_f32 (f32.mul
                (f32.reinterpret_i32 (i32.shl (i32.and (local.get $h) (i32.const 0x7fff)) (i32.const 13)))
                (f32.const 0x1p112)))))))))
        (local.set $b (v128.load (local.get $c)))
        (local.set $lo (v128.and (local.get $b) (i8x16.splat (i32.const 15))))
        (local.set $hi (i8x16.shr_u (local.get $b) (i32.const 4)))
        ;; columns 0-15: bytes 0-7's nibbles, low then high, less 8.
        (local.set $v (i8x16.sub
          (i8x16.shuffle 0 16 1 17 2 18 3 19 4 20 5 21 6 22 7 23 (local.get $lo) (local.get $hi))
          (i8x16.splat (i32.const 8))))
        (local.set $b (i16x8.extend_low_i8x16_s (local.get $v)))
        (local.set $a0 (f32x4.add (local.get $a0)
          (f32x4.mul (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (local.get $b))) (local.get $sc))
            (v128.load (local.get $x)))))
        (local.set $a1 (f32x4.add (local.get $a1)
          (f32x4.mul (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_s (local.get $b))) (local.get $sc))
            (v128.load offset=16 (local.get $x)))))
        (local.set $b (i16x8.extend_high_i8x16_s (local.get $v)))
        (local.set $a2 (f32x4.add (local.get $a2)
          (f32x4.mul (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (local.get $b))) (local.get $sc))
            (v128.load offset=32 (local.get $x)))))
        (local.set $a3 (f32x4.add (local.get $a3)
          (f32x4.mul (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_s (local.get $b))) (local.get $sc))
            (v128.load offset=48 (local.get $x)))))
        ;; columns 16-31: bytes 8-15's.
        (local.set $v (i8x16.sub
          (i8x16.shuffle 8 24 9 25 10 26 11 27 12 28 13 29 14 30 15 31 (local.get $lo) (local.get $hi))
          (i8x16.splat (i32.const 8))))
        (local.set $b (i16x8.extend_low_i8x16_s (local.get $v)))
        (local.set $a0 (f32x4.add (local.get $a0)
          (f32x4.mul (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (local.get $b))) (local.get $sc))
            (v128.load offset=64 (local.get $x)))))
        (local.set $a1 (f32x4.add (local.get $a1)
          (f32x4.mul (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_s (local.get $b))) (local.get $sc))
            (v128.load offset=80 (local.get $x)))))
        (local.set $b (i16x8.extend_high_i8x16_s (local.get $v)))
        (local.set $a2 (f32x4.add (local.get $a2)
          (f32x4.mul (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (local.get $b))) (local.get $sc))
            (v128.load offset=96 (local.get $x)))))
        (local.set $a3 (f32x4.add (local.get $a3)
          (f32x4.mul (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_s (local.get $b))) (local.get $sc))
            (v128.load offset=112 (local.get $x)))))
        (local.set $c (i32.add (local.get $c) (i32.const 16)))
        (local.set $s (i32.add (local.get $s) (i32.const 2)))
        (local.set $x (i32.add (local.get $x) (i32.const 128)))
        (br $group)))
    (call $reduce (local.get $a0) (local.get $a1) (local.get $a2) (local.get $a3)))

  ;; $q8dot is one q8 row's product: groups of 32 int8 codes at $c, as
  ;; $q4dot.
  (func $q8dot (param $c i32) (param $s i32) (param $x i32) (param $groups i32) (result f32)
    (local $a0 v128) (local $a1 v128) (local $a2 v128) (local $a3 v128)
    (local $b v128) (local $v v128) (local $sc v128)
    (local $end i32) (local $h i32)
    (local.set $end (i32.add (local.get $c) (i32.shl (local.get $groups) (i32.const 5))))
    (block $done
      (loop $group
        (br_if $done (i32.ge_u (local.get $c) (local.get $end)))
        (local.set $h (i32.load16_u (local.get $s)))
        (local.set $sc (f32x4.splat (f32.reinterpret_i32
          (i32.or (i32.shl (i32.and (local.get $h) (i32.const 0x8000)) (i32.const 16))
            (if (result i32) (i32.ge_u (i32.and (local.get $h) (i32.const 0x7fff)) (i32.const 0x7c00))
              (then (call $halfNaN (local.get $h)))
              (else (i32.reinterpret_f32 (f32.mul
                (f32.reinterpret_i32 (i32.shl (i32.and (local.get $h) (i32.const 0x7fff)) (i32.const 13)))
                (f32.const 0x1p112)))))))))
        (local.set $v (v128.load (local.get $c)))
        (local.set $b (i16x8.extend_low_i8x16_s (local.get $v)))
        (local.set $a0 (f32x4.add (local.get $a0)
          (f32x4.mul (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (local.get $b))) (local.get $sc))
            (v128.load (local.get $x)))))
        (local.set $a1 (f32x4.add (local.get $a1)
          (f32x4.mul (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_s (local.get $b))) (local.get $sc))
            (v128.load offset=16 (local.get $x)))))
        (local.set $b (i16x8.extend_high_i8x16_s (local.get $v)))
        (local.set $a2 (f32x4.add (local.get $a2)
          (f32x4.mul (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (local.get $b))) (local.get $sc))
            (v128.load offset=32 (local.get $x)))))
        (local.set $a3 (f32x4.add (local.get $a3)
          (f32x4.mul (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_s (local.get $b))) (local.get $sc))
            (v128.load offset=48 (local.get $x)))))
        (local.set $v (v128.load offset=16 (local.get $c)))
        (local.set $b (i16x8.extend_low_i8x16_s (local.get $v)))
        (local.set $a0 (f32x4.add (local.get $a0)
          (f32x4.mul (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (local.get $b))) (local.get $sc))
            (v128.load offset=64 (local.get $x)))))
        (local.set $a1 (f32x4.add (local.get $a1)
          (f32x4.mul (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_s (local.get $b))) (local.get $sc))
            (v128.load offset=80 (local.get $x)))))
        (local.set $b (i16x8.extend_high_i8x16_s (local.get $v)))
        (local.set $a2 (f32x4.add (local.get $a2)
          (f32x4.mul (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (local.get $b))) (local.get $sc))
            (v128.load offset=96 (local.get $x)))))
        (local.set $a3 (f32x4.add (local.get $a3)
          (f32x4.mul (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_s (local.get $b))) (local.get $sc))
            (v128.load offset=112 (local.get $x)))))
        (local.set $c (i32.add (local.get $c) (i32.const 32)))
        (local.set $s (i32.add (local.get $s) (i32.const 2)))
        (local.set $x (i32.add (local.get $x) (i32.const 128)))
        (br $group)))
    (call $reduce (local.get $a0) (local.get $a1) (local.get $a2) (local.get $a3)))

  (func (export "q4_rows") (param $c i32) (param $ldc i32) (param $s i32) (param $lds i32) (param $groups i32) (param $x i32) (param $out i32) (param $rows i32)
    (block $done
      (loop $row
        (br_if $done (i32.le_s (local.get $rows) (i32.const 0)))
        (f32.store (local.get $out) (call $q4dot (local.get $c) (local.get $s) (local.get $x) (local.get $groups)))
        (local.set $c (i32.add (local.get $c) (local.get $ldc)))
        (local.set $s (i32.add (local.get $s) (local.get $lds)))
        (local.set $out (i32.add (local.get $out) (i32.const 4)))
        (local.set $rows (i32.sub (local.get $rows) (i32.const 1)))
        (br $row))))

  (func (export "q8_rows") (param $c i32) (param $ldc i32) (param $s i32) (param $lds i32) (param $groups i32) (param $x i32) (param $out i32) (param $rows i32)
    (block $done
      (loop $row
        (br_if $done (i32.le_s (local.get $rows) (i32.const 0)))
        (f32.store (local.get $out) (call $q8dot (local.get $c) (local.get $s) (local.get $x) (local.get $groups)))
        (local.set $c (i32.add (local.get $c) (local.get $ldc)))
        (local.set $s (i32.add (local.get $s) (local.get $lds)))
        (local.set $out (i32.add (local.get $out) (i32.const 4)))
        (local.set $rows (i32.sub (local.get $rows) (i32.const 1)))
        (br $row))))

  ;; $q4decode and $q8decode decode one row's groups into float32 at $d,
  ;; 32 a group, each value float32(code)*scale as in $q4dot and $q8dot.
  (func $q4decode (param $c i32) (param $s i32) (param $groups i32) (param $d i32)
    (local $b v128) (local $lo v128) (local $hi v128) (local $v v128) (local $sc v128)
    (local $end i32) (local $h i32)
    (local.set $end (i32.add (local.get $c) (i32.shl (local.get $groups) (i32.const 4))))
    (block $done
      (loop $group
        (br_if $done (i32.ge_u (local.get $c) (local.get $end)))
        (local.set $h (i32.load16_u (local.get $s)))
        (local.set $sc (f32x4.splat (f32.reinterpret_i32
          (i32.or (i32.shl (i32.and (local.get $h) (i32.const 0x8000)) (i32.const 16))
            (if (result i32) (i32.ge_u (i32.and (local.get $h) (i32.const 0x7fff)) (i32.const 0x7c00))
              (then (call $halfNaN (local.get $h)))
              (else (i32.reinterpret_f32 (f32.mul
                (f32.reinterpret_i32 (i32.shl (i32.and (local.get $h) (i32.const 0x7fff)) (i32.const 13)))
                (f32.const 0x1p112)))))))))
        (local.set $b (v128.load (local.get $c)))
        (local.set $lo (v128.and (local.get $b) (i8x16.splat (i32.const 15))))
        (local.set $hi (i8x16.shr_u (local.get $b) (i32.const 4)))
        (local.set $v (i8x16.sub
          (i8x16.shuffle 0 16 1 17 2 18 3 19 4 20 5 21 6 22 7 23 (local.get $lo) (local.get $hi))
          (i8x16.splat (i32.const 8))))
        (local.set $b (i16x8.extend_low_i8x16_s (local.get $v)))
        (v128.store offset=0 (local.get $d) (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (local.get $b))) (local.get $sc)))
        (v128.store offset=16 (local.get $d) (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_s (local.get $b))) (local.get $sc)))
        (local.set $b (i16x8.extend_high_i8x16_s (local.get $v)))
        (v128.store offset=32 (local.get $d) (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (local.get $b))) (local.get $sc)))
        (v128.store offset=48 (local.get $d) (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_s (local.get $b))) (local.get $sc)))
        (local.set $v (i8x16.sub
          (i8x16.shuffle 8 24 9 25 10 26 11 27 12 28 13 29 14 30 15 31 (local.get $lo) (local.get $hi))
          (i8x16.splat (i32.const 8))))
        (local.set $b (i16x8.extend_low_i8x16_s (local.get $v)))
        (v128.store offset=64 (local.get $d) (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (local.get $b))) (local.get $sc)))
        (v128.store offset=80 (local.get $d) (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_s (local.get $b))) (local.get $sc)))
        (local.set $b (i16x8.extend_high_i8x16_s (local.get $v)))
        (v128.store offset=96 (local.get $d) (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (local.get $b))) (local.get $sc)))
        (v128.store offset=112 (local.get $d) (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_s (local.get $b))) (local.get $sc)))
        (local.set $c (i32.add (local.get $c) (i32.const 16)))
        (local.set $s (i32.add (local.get $s) (i32.const 2)))
        (local.set $d (i32.add (local.get $d) (i32.const 128)))
        (br $group))))

  (func $q8decode (param $c i32) (param $s i32) (param $groups i32) (param $d i32)
    (local $b v128) (local $v v128) (local $sc v128)
    (local $end i32) (local $h i32)
    (local.set $end (i32.add (local.get $c) (i32.shl (local.get $groups) (i32.const 5))))
    (block $done
      (loop $group
        (br_if $done (i32.ge_u (local.get $c) (local.get $end)))
        (local.set $h (i32.load16_u (local.get $s)))
        (local.set $sc (f32x4.splat (f32.reinterpret_i32
          (i32.or (i32.shl (i32.and (local.get $h) (i32.const 0x8000)) (i32.const 16))
            (if (result i32) (i32.ge_u (i32.and (local.get $h) (i32.const 0x7fff)) (i32.const 0x7c00))
              (then (call $halfNaN (local.get $h)))
              (else (i32.reinterpret_f32 (f32.mul
                (f32.reinterpret_i32 (i32.shl (i32.and (local.get $h) (i32.const 0x7fff)) (i32.const 13)))
                (f32.const 0x1p112)))))))))
        (local.set $v (v128.load (local.get $c)))
        (local.set $b (i16x8.extend_low_i8x16_s (local.get $v)))
        (v128.store offset=0 (local.get $d) (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (local.get $b))) (local.get $sc)))
        (v128.store offset=16 (local.get $d) (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_s (local.get $b))) (local.get $sc)))
        (local.set $b (i16x8.extend_high_i8x16_s (local.get $v)))
        (v128.store offset=32 (local.get $d) (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (local.get $b))) (local.get $sc)))
        (v128.store offset=48 (local.get $d) (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_s (local.get $b))) (local.get $sc)))
        (local.set $v (v128.load offset=16 (local.get $c)))
        (local.set $b (i16x8.extend_low_i8x16_s (local.get $v)))
        (v128.store offset=64 (local.get $d) (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (local.get $b))) (local.get $sc)))
        (v128.store offset=80 (local.get $d) (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_s (local.get $b))) (local.get $sc)))
        (local.set $b (i16x8.extend_high_i8x16_s (local.get $v)))
        (v128.store offset=96 (local.get $d) (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (local.get $b))) (local.get $sc)))
        (v128.store offset=112 (local.get $d) (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_s (local.get $b))) (local.get $sc)))
        (local.set $c (i32.add (local.get $c) (i32.const 32)))
        (local.set $s (i32.add (local.get $s) (i32.const 2)))
        (local.set $d (i32.add (local.get $d) (i32.const 128)))
        (br $group))))

  (func (export "q4_decode") (param $c i32) (param $ldc i32) (param $s i32) (param $lds i32) (param $groups i32) (param $d i32) (param $ldd i32) (param $rows i32)
    (block $done
      (loop $row
        (br_if $done (i32.le_s (local.get $rows) (i32.const 0)))
        (call $q4decode (local.get $c) (local.get $s) (local.get $groups) (local.get $d))
        (local.set $c (i32.add (local.get $c) (local.get $ldc)))
        (local.set $s (i32.add (local.get $s) (local.get $lds)))
        (local.set $d (i32.add (local.get $d) (local.get $ldd)))
        (local.set $rows (i32.sub (local.get $rows) (i32.const 1)))
        (br $row))))

  (func (export "q8_decode") (param $c i32) (param $ldc i32) (param $s i32) (param $lds i32) (param $groups i32) (param $d i32) (param $ldd i32) (param $rows i32)
    (block $done
      (loop $row
        (br_if $done (i32.le_s (local.get $rows) (i32.const 0)))
        (call $q8decode (local.get $c) (local.get $s) (local.get $groups) (local.get $d))
        (local.set $c (i32.add (local.get $c) (local.get $ldc)))
        (local.set $s (i32.add (local.get $s) (local.get $lds)))
        (local.set $d (i32.add (local.get $d) (local.get $ldd)))
        (local.set $rows (i32.sub (local.get $rows) (i32.const 1)))
        (br $row))))

  ;; $q40dot is one ggml Q4_0 row's product: blocks of 18 bytes at $p
  ;; (an f16 d, then 16 bytes: column j in byte j's low nibble, j+16 in its high one, value nibble − 8), x at $x, as $q4dot.
  (func $q40dot (param $p i32) (param $x i32) (param $blocks i32) (result f32)
    (local $a0 v128) (local $a1 v128) (local $a2 v128) (local $a3 v128)
    (local $b v128) (local $lo v128) (local $v v128) (local $sc v128)
    (local $end i32) (local $h i32)
    (local.set $end (i32.add (local.get $p) (i32.mul (local.get $blocks) (i32.const 18))))
    (block $done
      (loop $block
        (br_if $done (i32.ge_u (local.get $p) (local.get $end)))
        (local.set $h (i32.load16_u (local.get $p)))
        (local.set $sc (f32x4.splat (f32.reinterpret_i32
          (i32.or (i32.shl (i32.and (local.get $h) (i32.const 0x8000)) (i32.const 16))
            (if (result i32) (i32.ge_u (i32.and (local.get $h) (i32.const 0x7fff)) (i32.const 0x7c00))
              (then (call $halfNaN (local.get $h)))
              (else (i32.reinterpret_f32 (f32.mul
                (f32.reinterpret_i32 (i32.shl (i32.and (local.get $h) (i32.const 0x7fff)) (i32.const 13)))
                (f32.const 0x1p112)))))))))
        (local.set $lo (v128.load offset=2 (local.get $p)))
        (local.set $v (i8x16.sub (v128.and (local.get $lo) (i8x16.splat (i32.const 15))) (i8x16.splat (i32.const 8))))
        (local.set $b (i16x8.extend_low_i8x16_s (local.get $v)))
        (local.set $a0 (f32x4.add (local.get $a0)
          (f32x4.mul (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (local.get $b))) (local.get $sc))
            (v128.load (local.get $x)))))
        (local.set $a1 (f32x4.add (local.get $a1)
          (f32x4.mul (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_s (local.get $b))) (local.get $sc))
            (v128.load offset=16 (local.get $x)))))
        (local.set $b (i16x8.extend_high_i8x16_s (local.get $v)))
        (local.set $a2 (f32x4.add (local.get $a2)
          (f32x4.mul (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (local.get $b))) (local.get $sc))
            (v128.load offset=32 (local.get $x)))))
        (local.set $a3 (f32x4.add (local.get $a3)
          (f32x4.mul (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_s (local.get $b))) (local.get $sc))
            (v128.load offset=48 (local.get $x)))))
        (local.set $v (i8x16.sub (i8x16.shr_u (local.get $lo) (i32.const 4)) (i8x16.splat (i32.const 8))))
        (local.set $b (i16x8.extend_low_i8x16_s (local.get $v)))
        (local.set $a0 (f32x4.add (local.get $a0)
          (f32x4.mul (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (local.get $b))) (local.get $sc))
            (v128.load offset=64 (local.get $x)))))
        (local.set $a1 (f32x4.add (local.get $a1)
          (f32x4.mul (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_s (local.get $b))) (local.get $sc))
            (v128.load offset=80 (local.get $x)))))
        (local.set $b (i16x8.extend_high_i8x16_s (local.get $v)))
        (local.set $a2 (f32x4.add (local.get $a2)
          (f32x4.mul (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (local.get $b))) (local.get $sc))
            (v128.load offset=96 (local.get $x)))))
        (local.set $a3 (f32x4.add (local.get $a3)
          (f32x4.mul (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_s (local.get $b))) (local.get $sc))
            (v128.load offset=112 (local.get $x)))))
        (local.set $p (i32.add (local.get $p) (i32.const 18)))
        (local.set $x (i32.add (local.get $x) (i32.const 128)))
        (br $block)))
    (call $reduce (local.get $a0) (local.get $a1) (local.get $a2) (local.get $a3)))

  ;; $q40decode decodes one Q4_0 row's blocks into float32 at $d.
  (func $q40decode (param $p i32) (param $blocks i32) (param $d i32)
    (local $b v128) (local $lo v128) (local $v v128) (local $sc v128)
    (local $end i32) (local $h i32)
    (local.set $end (i32.add (local.get $p) (i32.mul (local.get $blocks) (i32.const 18))))
    (block $done
      (loop $block
        (br_if $done (i32.ge_u (local.get $p) (local.get $end)))
        (local.set $h (i32.load16_u (local.get $p)))
        (local.set $sc (f32x4.splat (f32.reinterpret_i32
          (i32.or (i32.shl (i32.and (local.get $h) (i32.const 0x8000)) (i32.const 16))
            (if (result i32) (i32.ge_u (i32.and (local.get $h) (i32.const 0x7fff)) (i32.const 0x7c00))
              (then (call $halfNaN (local.get $h)))
              (else (i32.reinterpret_f32 (f32.mul
                (f32.reinterpret_i32 (i32.shl (i32.and (local.get $h) (i32.const 0x7fff)) (i32.const 13)))
                (f32.const 0x1p112)))))))))
        (local.set $lo (v128.load offset=2 (local.get $p)))
        (local.set $v (i8x16.sub (v128.and (local.get $lo) (i8x16.splat (i32.const 15))) (i8x16.splat (i32.const 8))))
        (local.set $b (i16x8.extend_low_i8x16_s (local.get $v)))
        (v128.store (local.get $d) (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (local.get $b))) (local.get $sc)))
        (v128.store offset=16 (local.get $d) (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_s (local.get $b))) (local.get $sc)))
        (local.set $b (i16x8.extend_high_i8x16_s (local.get $v)))
        (v128.store offset=32 (local.get $d) (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (local.get $b))) (local.get $sc)))
        (v128.store offset=48 (local.get $d) (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_s (local.get $b))) (local.get $sc)))
        (local.set $v (i8x16.sub (i8x16.shr_u (local.get $lo) (i32.const 4)) (i8x16.splat (i32.const 8))))
        (local.set $b (i16x8.extend_low_i8x16_s (local.get $v)))
        (v128.store offset=64 (local.get $d) (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (local.get $b))) (local.get $sc)))
        (v128.store offset=80 (local.get $d) (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_s (local.get $b))) (local.get $sc)))
        (local.set $b (i16x8.extend_high_i8x16_s (local.get $v)))
        (v128.store offset=96 (local.get $d) (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (local.get $b))) (local.get $sc)))
        (v128.store offset=112 (local.get $d) (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_s (local.get $b))) (local.get $sc)))
        (local.set $p (i32.add (local.get $p) (i32.const 18)))
        (local.set $d (i32.add (local.get $d) (i32.const 128)))
        (br $block))))

  (func (export "q4_0_rows") (param $p i32) (param $ldr i32) (param $blocks i32) (param $x i32) (param $out i32) (param $rows i32)
    (block $done
      (loop $row
        (br_if $done (i32.le_s (local.get $rows) (i32.const 0)))
        (f32.store (local.get $out) (call $q40dot (local.get $p) (local.get $x) (local.get $blocks)))
        (local.set $p (i32.add (local.get $p) (local.get $ldr)))
        (local.set $out (i32.add (local.get $out) (i32.const 4)))
        (local.set $rows (i32.sub (local.get $rows) (i32.const 1)))
        (br $row))))

  (func (export "q4_0_decode") (param $p i32) (param $ldr i32) (param $blocks i32) (param $d i32) (param $ldd i32) (param $rows i32)
    (block $done
      (loop $row
        (br_if $done (i32.le_s (local.get $rows) (i32.const 0)))
        (call $q40decode (local.get $p) (local.get $blocks) (local.get $d))
        (local.set $p (i32.add (local.get $p) (local.get $ldr)))
        (local.set $d (i32.add (local.get $d) (local.get $ldd)))
        (local.set $rows (i32.sub (local.get $rows) (i32.const 1)))
        (br $row))))

  ;; $q80dot is one ggml Q8_0 row's product: blocks of 34 bytes at $p
  ;; (an f16 d, then 32 int8 codes), x at $x, as $q4dot.
  (func $q80dot (param $p i32) (param $x i32) (param $blocks i32) (result f32)
    (local $a0 v128) (local $a1 v128) (local $a2 v128) (local $a3 v128)
    (local $b v128) (local $lo v128) (local $v v128) (local $sc v128)
    (local $end i32) (local $h i32)
    (local.set $end (i32.add (local.get $p) (i32.mul (local.get $blocks) (i32.const 34))))
    (block $done
      (loop $block
        (br_if $done (i32.ge_u (local.get $p) (local.get $end)))
        (local.set $h (i32.load16_u (local.get $p)))
        (local.set $sc (f32x4.splat (f32.reinterpret_i32
          (i32.or (i32.shl (i32.and (local.get $h) (i32.const 0x8000)) (i32.const 16))
            (if (result i32) (i32.ge_u (i32.and (local.get $h) (i32.const 0x7fff)) (i32.const 0x7c00))
              (then (call $halfNaN (local.get $h)))
              (else (i32.reinterpret_f32 (f32.mul
                (f32.reinterpret_i32 (i32.shl (i32.and (local.get $h) (i32.const 0x7fff)) (i32.const 13)))
                (f32.const 0x1p112)))))))))
        (local.set $v (v128.load offset=2 (local.get $p)))
        (local.set $b (i16x8.extend_low_i8x16_s (local.get $v)))
        (local.set $a0 (f32x4.add (local.get $a0)
          (f32x4.mul (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (local.get $b))) (local.get $sc))
            (v128.load (local.get $x)))))
        (local.set $a1 (f32x4.add (local.get $a1)
          (f32x4.mul (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_s (local.get $b))) (local.get $sc))
            (v128.load offset=16 (local.get $x)))))
        (local.set $b (i16x8.extend_high_i8x16_s (local.get $v)))
        (local.set $a2 (f32x4.add (local.get $a2)
          (f32x4.mul (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (local.get $b))) (local.get $sc))
            (v128.load offset=32 (local.get $x)))))
        (local.set $a3 (f32x4.add (local.get $a3)
          (f32x4.mul (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_s (local.get $b))) (local.get $sc))
            (v128.load offset=48 (local.get $x)))))
        (local.set $v (v128.load offset=18 (local.get $p)))
        (local.set $b (i16x8.extend_low_i8x16_s (local.get $v)))
        (local.set $a0 (f32x4.add (local.get $a0)
          (f32x4.mul (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (local.get $b))) (local.get $sc))
            (v128.load offset=64 (local.get $x)))))
        (local.set $a1 (f32x4.add (local.get $a1)
          (f32x4.mul (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_s (local.get $b))) (local.get $sc))
            (v128.load offset=80 (local.get $x)))))
        (local.set $b (i16x8.extend_high_i8x16_s (local.get $v)))
        (local.set $a2 (f32x4.add (local.get $a2)
          (f32x4.mul (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (local.get $b))) (local.get $sc))
            (v128.load offset=96 (local.get $x)))))
        (local.set $a3 (f32x4.add (local.get $a3)
          (f32x4.mul (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_s (local.get $b))) (local.get $sc))
            (v128.load offset=112 (local.get $x)))))
        (local.set $p (i32.add (local.get $p) (i32.const 34)))
        (local.set $x (i32.add (local.get $x) (i32.const 128)))
        (br $block)))
    (call $reduce (local.get $a0) (local.get $a1) (local.get $a2) (local.get $a3)))

  ;; $q80decode decodes one Q8_0 row's blocks into float32 at $d.
  (func $q80decode (param $p i32) (param $blocks i32) (param $d i32)
    (local $b v128) (local $lo v128) (local $v v128) (local $sc v128)
    (local $end i32) (local $h i32)
    (local.set $end (i32.add (local.get $p) (i32.mul (local.get $blocks) (i32.const 34))))
    (block $done
      (loop $block
        (br_if $done (i32.ge_u (local.get $p) (local.get $end)))
        (local.set $h (i32.load16_u (local.get $p)))
        (local.set $sc (f32x4.splat (f32.reinterpret_i32
          (i32.or (i32.shl (i32.and (local.get $h) (i32.const 0x8000)) (i32.const 16))
            (if (result i32) (i32.ge_u (i32.and (local.get $h) (i32.const 0x7fff)) (i32.const 0x7c00))
              (then (call $halfNaN (local.get $h)))
              (else (i32.reinterpret_f32 (f32.mul
                (f32.reinterpret_i32 (i32.shl (i32.and (local.get $h) (i32.const 0x7fff)) (i32.const 13)))
                (f32.const 0x1p112)))))))))
        (local.set $v (v128.load offset=2 (local.get $p)))
        (local.set $b (i16x8.extend_low_i8x16_s (local.get $v)))
        (v128.store (local.get $d) (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (local.get $b))) (local.get $sc)))
        (v128.store offset=16 (local.get $d) (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_s (local.get $b))) (local.get $sc)))
        (local.set $b (i16x8.extend_high_i8x16_s (local.get $v)))
        (v128.store offset=32 (local.get $d) (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (local.get $b))) (local.get $sc)))
        (v128.store offset=48 (local.get $d) (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_s (local.get $b))) (local.get $sc)))
        (local.set $v (v128.load offset=18 (local.get $p)))
        (local.set $b (i16x8.extend_low_i8x16_s (local.get $v)))
        (v128.store offset=64 (local.get $d) (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (local.get $b))) (local.get $sc)))
        (v128.store offset=80 (local.get $d) (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_s (local.get $b))) (local.get $sc)))
        (local.set $b (i16x8.extend_high_i8x16_s (local.get $v)))
        (v128.store offset=96 (local.get $d) (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (local.get $b))) (local.get $sc)))
        (v128.store offset=112 (local.get $d) (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_s (local.get $b))) (local.get $sc)))
        (local.set $p (i32.add (local.get $p) (i32.const 34)))
        (local.set $d (i32.add (local.get $d) (i32.const 128)))
        (br $block))))

  (func (export "q8_0_rows") (param $p i32) (param $ldr i32) (param $blocks i32) (param $x i32) (param $out i32) (param $rows i32)
    (block $done
      (loop $row
        (br_if $done (i32.le_s (local.get $rows) (i32.const 0)))
        (f32.store (local.get $out) (call $q80dot (local.get $p) (local.get $x) (local.get $blocks)))
        (local.set $p (i32.add (local.get $p) (local.get $ldr)))
        (local.set $out (i32.add (local.get $out) (i32.const 4)))
        (local.set $rows (i32.sub (local.get $rows) (i32.const 1)))
        (br $row))))

  (func (export "q8_0_decode") (param $p i32) (param $ldr i32) (param $blocks i32) (param $d i32) (param $ldd i32) (param $rows i32)
    (block $done
      (loop $row
        (br_if $done (i32.le_s (local.get $rows) (i32.const 0)))
        (call $q80decode (local.get $p) (local.get $blocks) (local.get $d))
        (local.set $p (i32.add (local.get $p) (local.get $ldr)))
        (local.set $d (i32.add (local.get $d) (local.get $ldd)))
        (local.set $rows (i32.sub (local.get $rows) (i32.const 1)))
        (br $row))))

  ;; $tile2x4 carries lane group j (lanes 4j..4j+3) of the tiles of rows
  ;; $w and $w+$ldw by the four tokens from $x (stride $ldx) over k
  ;; columns, their lanes at $acc (tile t of the first row at $acc+64t,
  ;; of the second at $acc+256+64t, each already offset by 16j). Lane
  ;; groups are independent (a lane only ever meets its own columns), so
  ;; eight accumulators cover two rows by four tokens.
  (func $tile2x4 (param $w i32) (param $ldw i32) (param $x i32) (param $ldx i32) (param $k i32) (param $j i32) (param $acc i32) (param $zero i32)
    (local $p0 v128) (local $p1 v128) (local $p2 v128) (local $p3 v128)
    (local $q0 v128) (local $q1 v128) (local $q2 v128) (local $q3 v128)
    (local $w0 v128) (local $w1 v128) (local $xt v128)
    (local $x1 i32) (local $x2 i32) (local $x3 i32) (local $w2 i32)
    (local $i i32) (local $full i32) (local $n i32)
    (if (i32.eqz (local.get $zero))
      (then
        (local.set $p0 (v128.load offset=0 (local.get $acc)))
        (local.set $p1 (v128.load offset=64 (local.get $acc)))
        (local.set $p2 (v128.load offset=128 (local.get $acc)))
        (local.set $p3 (v128.load offset=192 (local.get $acc)))
        (local.set $q0 (v128.load offset=256 (local.get $acc)))
        (local.set $q1 (v128.load offset=320 (local.get $acc)))
        (local.set $q2 (v128.load offset=384 (local.get $acc)))
        (local.set $q3 (v128.load offset=448 (local.get $acc)))))
    (local.set $w (i32.add (local.get $w) (i32.shl (local.get $j) (i32.const 4))))
    (local.set $x (i32.add (local.get $x) (i32.shl (local.get $j) (i32.const 4))))
    (local.set $w2 (i32.add (local.get $w) (local.get $ldw)))
    (local.set $x1 (i32.add (local.get $x) (local.get $ldx)))
    (local.set $x2 (i32.add (local.get $x1) (local.get $ldx)))
    (local.set $x3 (i32.add (local.get $x2) (local.get $ldx)))
    (local.set $full (i32.shl (i32.and (local.get $k) (i32.const -16)) (i32.const 2)))
    (block $done
      (loop $chunk
        (br_if $done (i32.ge_u (local.get $i) (local.get $full)))
        (local.set $w0 (v128.load (i32.add (local.get $w) (local.get $i))))
        (local.set $w1 (v128.load (i32.add (local.get $w2) (local.get $i))))
        (local.set $xt (v128.load (i32.add (local.get $x) (local.get $i))))
        (local.set $p0 (f32x4.add (local.get $p0) (f32x4.mul (local.get $w0) (local.get $xt))))
        (local.set $q0 (f32x4.add (local.get $q0) (f32x4.mul (local.get $w1) (local.get $xt))))
        (local.set $xt (v128.load (i32.add (local.get $x1) (local.get $i))))
        (local.set $p1 (f32x4.add (local.get $p1) (f32x4.mul (local.get $w0) (local.get $xt))))
        (local.set $q1 (f32x4.add (local.get $q1) (f32x4.mul (local.get $w1) (local.get $xt))))
        (local.set $xt (v128.load (i32.add (local.get $x2) (local.get $i))))
        (local.set $p2 (f32x4.add (local.get $p2) (f32x4.mul (local.get $w0) (local.get $xt))))
        (local.set $q2 (f32x4.add (local.get $q2) (f32x4.mul (local.get $w1) (local.get $xt))))
        (local.set $xt (v128.load (i32.add (local.get $x3) (local.get $i))))
        (local.set $p3 (f32x4.add (local.get $p3) (f32x4.mul (local.get $w0) (local.get $xt))))
        (local.set $q3 (f32x4.add (local.get $q3) (f32x4.mul (local.get $w1) (local.get $xt))))
        (local.set $i (i32.add (local.get $i) (i32.const 64)))
        (br $chunk)))
    (local.set $n (i32.sub (i32.and (local.get $k) (i32.const 15)) (i32.shl (local.get $j) (i32.const 2))))
    (if (i32.and (local.get $k) (i32.const 15))
      (then
        (local.set $p0 (call $tail (local.get $p0) (i32.add (local.get $w) (local.get $i)) (i32.add (local.get $x) (local.get $i)) (local.get $n)))
        (local.set $p1 (call $tail (local.get $p1) (i32.add (local.get $w) (local.get $i)) (i32.add (local.get $x1) (local.get $i)) (local.get $n)))
        (local.set $p2 (call $tail (local.get $p2) (i32.add (local.get $w) (local.get $i)) (i32.add (local.get $x2) (local.get $i)) (local.get $n)))
        (local.set $p3 (call $tail (local.get $p3) (i32.add (local.get $w) (local.get $i)) (i32.add (local.get $x3) (local.get $i)) (local.get $n)))
        (local.set $q0 (call $tail (local.get $q0) (i32.add (local.get $w2) (local.get $i)) (i32.add (local.get $x) (local.get $i)) (local.get $n)))
        (local.set $q1 (call $tail (local.get $q1) (i32.add (local.get $w2) (local.get $i)) (i32.add (local.get $x1) (local.get $i)) (local.get $n)))
        (local.set $q2 (call $tail (local.get $q2) (i32.add (local.get $w2) (local.get $i)) (i32.add (local.get $x2) (local.get $i)) (local.get $n)))
        (local.set $q3 (call $tail (local.get $q3) (i32.add (local.get $w2) (local.get $i)) (i32.add (local.get $x3) (local.get $i)) (local.get $n)))))
    (v128.store offset=0 (local.get $acc) (local.get $p0))
    (v128.store offset=64 (local.get $acc) (local.get $p1))
    (v128.store offset=128 (local.get $acc) (local.get $p2))
    (v128.store offset=192 (local.get $acc) (local.get $p3))
    (v128.store offset=256 (local.get $acc) (local.get $q0))
    (v128.store offset=320 (local.get $acc) (local.get $q1))
    (v128.store offset=384 (local.get $acc) (local.get $q2))
    (v128.store offset=448 (local.get $acc) (local.get $q3)))

  (func (export "tile4x4") (param $w i32) (param $ldw i32) (param $x i32) (param $ldx i32) (param $k i32) (param $acc i32) (param $out i32) (param $flags i32)
    (local $r i32) (local $j i32) (local $t i32) (local $a i32)
    ;; rows 0-1, then 2-3; each by lane group.
    (loop $pair
      (local.set $j (i32.const 0))
      (loop $group
        (call $tile2x4
          (i32.add (local.get $w) (i32.mul (local.get $r) (local.get $ldw))) (local.get $ldw)
          (local.get $x) (local.get $ldx) (local.get $k) (local.get $j)
          (i32.add (local.get $acc) (i32.add (i32.shl (local.get $r) (i32.const 8)) (i32.shl (local.get $j) (i32.const 4))))
          (i32.and (local.get $flags) (i32.const 1)))
        (local.set $j (i32.add (local.get $j) (i32.const 1)))
        (br_if $group (i32.lt_u (local.get $j) (i32.const 4))))
      (local.set $r (i32.add (local.get $r) (i32.const 2)))
      (br_if $pair (i32.lt_u (local.get $r) (i32.const 4))))
    (if (i32.and (local.get $flags) (i32.const 2))
      (then
        (loop $tile
          (local.set $a (i32.add (local.get $acc) (i32.shl (local.get $t) (i32.const 6))))
          (f32.store (i32.add (local.get $out) (i32.shl (local.get $t) (i32.const 2)))
            (call $reduce (v128.load offset=0 (local.get $a)) (v128.load offset=16 (local.get $a))
              (v128.load offset=32 (local.get $a)) (v128.load offset=48 (local.get $a))))
          (local.set $t (i32.add (local.get $t) (i32.const 1)))
          (br_if $tile (i32.lt_u (local.get $t) (i32.const 16)))))))
)
