package cpu

import "logitscope/internal/model"

// RouteGrouped is GLM-4.5's router (transformers' Glm4MoeTopkRouter and
// Glm4MoeMoE.route_tokens_to_experts, main; DeepseekV3's in transformers
// is the same function) for one token's router logits (Experts,), in
// float32 as torch computes it:
//
//   - scores = sigmoid(logits); choice = scores + bias (the
//     e_score_correction_bias), used only to choose;
//   - each of the g.Groups equal groups of consecutive experts is scored
//     by the sum of its two largest choice scores, and the g.TopKGroup
//     best groups are kept; the other groups' choice scores become 0.0,
//     as transformers masks them (DeepSeek's own inference code masks
//     with −inf: where every kept choice score is negative, the two pick
//     differently);
//   - the g.TopK largest masked choice scores are chosen, largest first;
//   - the weights are the unbiased scores at those experts, divided by
//     their sum + 1e-20 when g.NormTopK, then times g.RoutedScale (always).
//
// Among equal scores, of groups or of experts, the lower index comes
// first, as torch.topk picks on the CPU (topK). transformers asks for
// sorted=False, which leaves the order of its indices to the backend; the
// ids returned here, and the routes every engine reports, are in
// decreasing choice score.
func RouteGrouped(logits, bias []float32, g model.Geometry) ([]int, []float32) {
	E := len(logits)
	n := E / g.Groups // experts per group
	scores, choice := make([]float32, E), make([]float32, E)
	for e, x := range logits {
		scores[e] = sigmoid(x)
		choice[e] = scores[e] + bias[e]
	}
	groups := make([]float32, g.Groups)
	for j := range groups {
		_, top := topK(choice[j*n:(j+1)*n], 2)
		groups[j] = top[0] + top[1]
	}
	kept, _ := topK(groups, g.TopKGroup)
	masked := make([]float32, E) // 0.0 outside the kept groups
	for _, j := range kept {
		copy(masked[j*n:(j+1)*n], choice[j*n:(j+1)*n])
	}
	ids, _ := topK(masked, g.TopK)
	w := make([]float32, len(ids))
	var sum float32
	for i, e := range ids {
		w[i] = scores[e]
		sum += w[i]
	}
	for i := range w {
		if g.NormTopK {
			w[i] /= sum + 1e-20
		}
		w[i] *= g.RoutedScale
	}
	return ids, w
}
