// A first look at dtensor's local Tensor: creation, views that share storage, chunking with
// torch.chunk semantics, cat and pad.
#include <dtensor/dtensor.h>

#include <iostream>
#include <string>

namespace dt = dtensor;

int main(int argc, char** argv) {
  if (argc > 1) {
    const std::string f = argv[1];
    const bool help = f == "--help" || f == "-h";
    (help ? std::cout : std::cerr)
        << "usage: hello_tensor [--help]\n"
           "  prints a tour of dtensor's local Tensor (creation, views, chunk, cat, pad, dtypes);\n"
           "  one process, no flags.\n";
    return help ? 0 : 2;
  }
  dt::Tensor x = dt::arange(0, 12, 1, dt::kFloat32).view({3, 4});
  std::cout << "x = " << x << "\n";

  dt::Tensor xt = x.transpose(0, 1);  // a view: no copy
  std::cout << "x.transpose(0, 1) = " << xt << " contiguous: " << std::boolalpha
            << xt.is_contiguous() << "\n";

  // torch.chunk: 5 rows over 4 chunks -> 2, 2, 1 rows (the 4th would be empty).
  dt::Tensor y = dt::arange(0, 10, 1, dt::kInt64).view({5, 2});
  auto parts = dt::chunk(y, 4, 0);
  for (size_t i = 0; i < parts.size(); ++i) {
    std::cout << "chunk " << i << " = " << parts[i] << "\n";
  }
  std::cout << "cat(chunks) == y: " << dt::equal(dt::cat(parts, 0), y) << "\n";
  std::cout << "pad(x, {1, 1}) = " << dt::pad(x, {1, 1}) << "\n";
  std::cout << "x.to(bfloat16) = " << x.to(dt::kBFloat16) << "\n";
  return 0;
}
