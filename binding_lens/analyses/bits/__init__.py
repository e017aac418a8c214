"""Binding information in bits, by layer, token set and probe family (method notes section 8).

`measure_bits` reads the token sets of train, validation and test color x shape scenes (their F codes
disjoint), trains an object-code and a feature-code probe of each family on each (layer, token set),
selects on validation, and scores on test: B_O, B_F, B*_OF, beta, beta* with image-bootstrap intervals
(`binding_lens.bits.binding_bits`). One-vector token sets (cls, mean) take the single-token families;
token sets (spatial, registers) take the attention probes (`attention_cls` reads [CLS] beside them, the
second paper's form). `measure_bits_of_tokens` does the same on token tensors given directly (a planted
code, a token set built by hand): the same probes, report, intervals and flags.

Entropies, two conventions (`BitsConfig.entropy`, each row names its own in `entropy`):
  population (the default) H(O), H(F), H(O | F) of the preset, over all its feature codes: the splits hold
      disjoint, uniformly drawn parts of the codes, so a probe trained on the others cannot know which codes
      the test split holds, and its test cross-entropy estimates the cross-entropy on codes of the preset it
      has not seen. A representation that carries nothing scores B_O = 0 in expectation, and B_O estimates
      a lower bound on I(O; Z) of the preset's scenes.
  split (the second paper's) the test split's own H(F) (log2 of its 76 codes instead of 784 on `balanced`),
      H(O | F) averaged over its scenes, H(O) = H(F) + H(O | F) (`data.priors.split_priors`): every B_O and
      B_F is 3.37 bits lower on `balanced`, and a representation that carries nothing scores -3.37.

The F-probe behind B_F and B*_OF is chosen apart from the O-probe (`BitsConfig.f_family`): by default the
F-probe of the token set with the lowest validation cross-entropy among the families fitted ("best": the
strongest that fits, chosen on validation so its test CE stays unbiased), or the O-probe's own family
("same"), or one named family. B*_OF is a difference of two upper bounds, so an under-fit probe pushes it
out of [0, H(O | F)]: each row says where it sits (`bound`; "bound violated: a probe under-fits").

A prior probe (`make_code_probe("prior", ...)`: the earlier bits and the features they cover, no
representation) is trained first; every family starts from its weights. Its test cross-entropy
`ce_o_null` is the best the probes do without the representation: `prior_gap` = ce_o_null - H(O) is how
far they are from modeling the prior itself (0.74 bits on `balanced` with 3,000 training scenes),
a looseness every B_O shares; `v_bits` = ce_o_null - ce_o is the information the representation adds
over that prior (the predictive V-information of Xu et al., 2020), zero in expectation for a
representation independent of O, and the same under both conventions.

Every number carries a 95 % bootstrap interval over test images, paired where two are compared:
`v_bits_low/high` (and `beyond_prior`: the representation adds information over the prior probe,
beyond noise) and `vs_linear` (each row's B_O minus the linear family's at its layer, on its token
set or else cls / mean: does a richer probe or another token set read more, beyond noise?).
`measure_bits_over_seeds` repeats the table over seeds (scene draw and probe initialization) and
reports each number as the mean with its Student-t interval across seeds instead.

Interventions in bits: `bits_under_interventions` projects out or shuffles a binding subspace (and a
random one of the same size) at one layer and reports the bits lost, paired over test images; any other
edit goes in as `fwd_hooks` to `measure_bits` (e.g. `[ProjectOut(sub, n_prefix).at(layer)]`), and the
token sets of every split are read from the edited stream, so the probes measure what is left.

Its modules: `scenes` (`CodedScenes`, the presets that carry codes), `config` (`BitsConfig`), `table` (the prior
probes and each token set's fits), `measure` (`measure_bits`, `measure_bits_of_tokens`), `result` (`BitsResult`),
`seeds` (`measure_bits_over_seeds`), `interventions` (`bits_under_interventions`).
"""

# Re-exported here (the package's public names; `X as X` marks a re-export, there is no `__all__`: these names
# are the analysis's own, importable from `binding_lens.analyses.<package>` as before it became one).
from .config import BitsConfig as BitsConfig
from .interventions import (
    InterventionConfig as InterventionConfig,
)
from .interventions import (
    bits_under_interventions as bits_under_interventions,
)
from .interventions import (
    intervention_table as intervention_table,
)
from .measure import measure_bits as measure_bits
from .measure import measure_bits_of_tokens as measure_bits_of_tokens
from .result import BitsResult as BitsResult
from .scenes import CODED_PRESETS as CODED_PRESETS
from .scenes import SPLITS as SPLITS
from .scenes import CodedScenes as CodedScenes
from .seeds import measure_bits_over_seeds as measure_bits_over_seeds
from .table import fit_prior_probes as fit_prior_probes
