package sensitivity

import (
	"logitscope/internal/analysis/attribution"
	"logitscope/internal/quant/variant"
)

// Policy is recipe r as a variant's policy, for variant.Write with the
// scheme r.Base.
func Policy(r *attribution.Recipe) *variant.Policy {
	p := &variant.Policy{}
	for _, x := range r.Rules {
		p.Rules = append(p.Rules, variant.Rule{Match: x.Match, Scheme: x.Scheme})
	}
	return p
}
