"""Does the model use its binding subspace? The paper's Table 2, with a random-subspace control and
paired intervals.

For one layer l and a quadratic probe trained there, every condition (shuffle ratios 0.5 / 1,
injection alphas 0.5 / 0, and the same alphas of `InjectByProbe`, which averages over the patches the
probe groups together instead of the ground-truth objects) is applied to the binding subspace of
dimension k and to a random subspace of the same dimension, mid-forward (with `replacements`, also the subspace
removed, its coordinates replaced by zero, the train images' mean, matched noise or another image's:
`binding.interventions.Replace`), and measured by:

- next-layer attention at l+1: the attention mass inside the query patch's own object (raw: near patches
  attend to each other and more often share an object, so it mixes proximity in), beside it the excess
  attention on own-object keys over other-object keys at the same grid distance
  (`effects.attention.own_object_excess_attention`: proximity does not count), and the KL to clean;
- segmentation: linear semantic and instance heads on the last layer, retrained for every condition
  with `head_seeds` seeds (3 by default: the same seeds for every condition), semantic and instance mIoU
  on held-out images, averaged over the seeds. Where the labeled patches hold a single class (the `matched`
  benchmark) the semantic head is not trained and semantic mIoU is neither measured nor reported: it would
  be 1 by construction (`AblationResult.skipped` says so);
- the DINO loss (teacher = student = the model, global + local crops, centering); shuffles only, as
  informed injection is undefined under local crops. The head is fitted on clean features with the
  backbone frozen unless one is given, and the table says which;
- a grouping model's own read-out, where its head is given (`grouping_head_gap`, `effects.grouping`): the
  head's mean same-object minus other-object cosine on the final features (flip pairs on twin mazes);
- the next layer's probe, where one is given (`next_probe_gap`): a probe trained at l+1 on clean tokens, read
  on the edited run's tokens at l+1, its mean P(same object) on same-object pairs minus on other-object pairs
  (flip pairs on twin mazes; `effects.pairs.gap_sums`): does block l+1 still write which patches belong
  together where a probe finds it?

Every condition is compared with the clean run on the same images (`reference` "clean"), and every
binding-subspace condition with the random-subspace one of the same kind and strength (`reference`
"random": the control that could win). Differences are paired by image (each measure is kept per image,
and every bootstrap replicate redraws the images for both sides) and, for head measures, by head seed;
their intervals follow `binding_lens.stats`' uncertainty model: images (bootstrap) plus the head seeds'
spread (`stats.inference.two_level_interval`), each with a p-value. A "head refit" row compares the clean
run's heads of two seeds: what retraining alone moves, the noise floor of a single-seed comparison. Plus,
on clean activations, the correlation of attention at l+1 with the probe's scores at l: the paper's r over
pairs and the partial r given patch distance, each with an interval and p-value over images
(`effects.attention.attention_score_correlation`, `attention_follows_scores`), never over pairs.

On twin mazes (the `matched` benchmark, found from the scenes' metadata: `activations.context.scene_twins`)
the two twins of a group are not independent: the split keeps them together (`split_by_image(groups=...)`),
every per-image part is summed per twin group, and every bootstrap and interval resamples twin groups. The
excess own-object attention there counts the benchmark's flip pairs only (`probes.pairing.twin_pairs`: the
same pairs in both twins, same-object in one and not in the other), where no network-free cue helps.

Its modules, in the order a study runs: `settings` (`AblationSettings`, `Readouts`), `plan` (the images checked,
split and paired, the conditions, the random controls), `forward` (the labeled images and the forward passes),
`parts` (each condition measured per image), `measures` (what each measure is and how it is reduced),
`differences` (each condition minus its reference), `study` (`ablation_study`), `tables`.
"""

# Re-exported here (the package's public names; `X as X` marks a re-export, there is no `__all__`: these names
# are the analysis's own, importable from `binding_lens.analyses.<package>` as before it became one).
from .forward import Labeled as Labeled
from .forward import label_images as label_images
from .measures import NEXT_PROBE as NEXT_PROBE
from .measures import ONE_CLASS as ONE_CLASS
from .measures import OWN_HEAD as OWN_HEAD
from .settings import AblationSettings as AblationSettings
from .settings import DinoCheckpoint as DinoCheckpoint
from .settings import Readouts as Readouts
from .study import AblationResult as AblationResult
from .study import ablation_study as ablation_study
from .tables import ablation_table as ablation_table
from .tables import difference_table as difference_table
