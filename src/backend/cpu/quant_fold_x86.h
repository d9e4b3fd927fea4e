// Horizontal folds of 8 int32 vectors into one, shared by the AVX2 quantized
// tiles. Not a normal header: quant_avx2.cpp and quant_lattice_avx2.cpp
// include it inside their anonymous namespaces, under their AVX2 target
// pragmas (functions, not lambdas: GCC 12 compiles a lambda's body without
// the file's target pragma, -Wpsabi: AVX vectors returned without AVX).

// Lane-pair sums: a's and b's 32-bit (Pair32) or 64-bit (Pair64) neighbours
// added, interleaved.
inline __m256i Pair32(__m256i a, __m256i b) {
  return _mm256_add_epi32(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b));
}
inline __m256i Pair64(__m256i a, __m256i b) {
  return _mm256_add_epi32(_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b));
}

// Lane r of the result = the sum of the 8 lanes of v[r] (exact: integers).
inline __m256i Fold8(const __m256i* v) {
  const __m256i a = Pair64(Pair32(v[0], v[1]), Pair32(v[2], v[3]));  // [s0..s3 low halves | high halves]
  const __m256i b = Pair64(Pair32(v[4], v[5]), Pair32(v[6], v[7]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
}
