"""The train chunk: one compiled program for every chunk length, and the cut of a span into chunks."""

import jax
import numpy as np
import pytest

from ladder.trainers.builtin import optim
from ladder.trainers.builtin.data import Mixture
from ladder.trainers.builtin.jitted import make_train_chunk, segments
from ladder.trainers.builtin.model import build


@pytest.mark.parametrize("start,end,k", [(0, 20, 8), (3, 13, 8), (5, 6, 8), (0, 17, 1), (7, 40, 4)])
def test_segments_cover_the_span_and_cut_at_every_multiple_of_k(start, end, k):
    segs = segments(start, end, k)
    assert segs[0][0] == start and segs[-1][0] + segs[-1][1] == end
    for (s0, n0), (s1, _) in zip(segs, segs[1:], strict=False):
        assert s0 + n0 == s1
    for s0, n in segs:
        assert 1 <= n <= k
        assert s0 // k == (s0 + n - 1) // k  # no chunk crosses a multiple of k
    # A run resumed at any step cuts the rest the way the whole run did, from the next multiple of k on.
    for resume in range(start, end):
        whole = [s for s in segments(start, end, k) if s[0] >= -(-resume // k) * k]
        again = [s for s in segments(resume, end, k) if s[0] >= -(-resume // k) * k]
        assert whole == again


def test_one_program_serves_every_chunk_length_with_the_same_numbers(rung_factory, moe_spec, data_spec):
    rung = rung_factory(moe_spec, steps=8)
    fm = build(rung.model, 0)
    opt = optim.make_optimizer(rung.optim, fm.params)
    chunk = make_train_chunk(fm, opt, optim.lr_multipliers(fm.param_names, rung.optim), None, steps_per_call=4)
    batches = Mixture(data_spec, rung.seq_len, 0).batches(0, 4, rung.batch_size)
    lrs = np.full(4, 2e-3, np.float32)

    def run(cuts):
        state, losses, s = (fm.params, fm.bias, opt.init(fm.params)), [], 0
        for n in cuts:
            *state, m = chunk(*state, batches[s:s + n], lrs[s:s + n])
            assert len(m["loss"]) == n
            losses += list(np.asarray(m["loss"]))
            s += n
        return jax.device_get(state[0]), losses

    p4, l4 = run([4])
    p13, l13 = run([1, 3])
    p22, l22 = run([2, 1, 1])
    assert chunk.jitted._cache_size() == 1  # lengths 4, 1, 3 and 2: one compile
    assert l4 == l13 == l22 and len(l4) == 4 and len(set(l4)) > 1
    for name in p4:
        np.testing.assert_array_equal(p4[name], p13[name])
        np.testing.assert_array_equal(p4[name], p22[name])
    with pytest.raises(ValueError, match="1..4 steps"):
        chunk(fm.params, fm.bias, opt.init(fm.params), batches, np.full(5, 1e-3, np.float32))
