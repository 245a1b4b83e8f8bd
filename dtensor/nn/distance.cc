// Distance modules (distance.h): forward calls the DTensor op.
#include "dtensor/nn/distance.h"

namespace dtensor::nn {

DTensor CosineSimilarity::forward(const DTensor& x1, const DTensor& x2) {
  return cosine_similarity(x1, x2, dim_, eps_);
}

DTensor PairwiseDistance::forward(const DTensor& x1, const DTensor& x2) {
  return pairwise_distance(x1, x2, p_, eps_, keepdim_);
}

}  // namespace dtensor::nn
