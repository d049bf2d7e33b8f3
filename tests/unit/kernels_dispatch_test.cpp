// The dispatcher: which tables exist, which is active, and that MINFER_ISA caps the choice. This binary sets
// MINFER_ISA=avx2 before main (cpu_features() reads it once, on first use).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "base/cpu_features.h"
#include "kernels/dispatch.h"

namespace minfer::kernels {
namespace {

const bool kCapped = setenv("MINFER_ISA", "avx2", 1) == 0;

TEST(KernelsDispatch, IsaCapFromEnvironment) {
  ASSERT_TRUE(kCapped);
  EXPECT_EQ(kernel_table(Isa::kAvx512), nullptr);
  ASSERT_NE(kernel_table(Isa::kScalar), nullptr);
  if (cpu_features().has_avx2_fma()) {
    EXPECT_STREQ(active_isa(), "avx2");
    ASSERT_NE(kernel_table(Isa::kAvx2), nullptr);
    EXPECT_EQ(kernel_table(Isa::kAvx2)->isa, Isa::kAvx2);
  } else {
    EXPECT_STREQ(active_isa(), "scalar");
  }
  EXPECT_EQ(&active_kernels(), kernel_table(active_kernels().isa));
}

TEST(KernelsDispatch, TablesAreComplete) {
  for (Isa isa : kAllIsas) {
    const KernelTable* t = kernel_table(isa);
    if (!t) continue;
    EXPECT_STREQ(t->name, isa_name(isa));
    EXPECT_TRUE(t->gemm && t->rmsnorm && t->rope && t->silu_mul && t->add && t->softmax && t->embedding &&
                t->kv_write && t->paged_attention);
  }
}

}  // namespace
}  // namespace minfer::kernels
