"""Generation through the Python API on the real stories260K model: single and batched prompts, token-id
prompts, streaming, the tokenizer, stats, and several Python threads at once."""

from __future__ import annotations

import signal
import threading
import time

import pytest

import minfer
from minfer import GenerationChunk, GenerationResult, SamplingParams

PROMPTS = ["Once upon a time", "The little dog", "Lily and Ben went to the park", "One day, a big bird"]


def test_single_prompt_gives_a_single_result(engine):
    r = engine.generate("Once upon a time", max_new_tokens=20, temperature=0)
    assert isinstance(r, GenerationResult)
    assert len(r.token_ids) == 20 and r.finish_reason == "length" and r.stop_reason is None
    assert r.text and r.prompt == "Once upon a time"
    assert r.prompt_token_ids == engine.tokenizer.encode("Once upon a time")
    assert r.text == engine.tokenizer.decode(r.token_ids, skip_special_tokens=True) or r.text.strip()


def test_batch_gives_results_in_prompt_order_equal_to_single_runs(engine):
    batch = engine.generate(PROMPTS, max_new_tokens=24, temperature=0)
    assert isinstance(batch, list) and [r.prompt for r in batch] == PROMPTS
    for prompt, r in zip(PROMPTS, batch):
        alone = engine.generate(prompt, max_new_tokens=24, temperature=0)
        assert r.token_ids == alone.token_ids and r.text == alone.text, prompt


def test_token_id_prompts(engine):
    ids = engine.tokenizer.encode("Once upon a time")
    by_ids = engine.generate(ids, max_new_tokens=16, temperature=0)
    by_text = engine.generate("Once upon a time", max_new_tokens=16, temperature=0)
    assert isinstance(by_ids, GenerationResult) and by_ids.prompt == ids
    assert by_ids.token_ids == by_text.token_ids
    two = engine.generate([ids, "Once upon a time"], max_new_tokens=16, temperature=0)
    assert [r.token_ids for r in two] == [by_text.token_ids] * 2


def test_sampling_params_object_and_keyword_override(engine):
    params = SamplingParams(max_new_tokens=8, temperature=0)
    a = engine.generate("The little dog", params)
    b = engine.generate("The little dog", sampling_params=params, max_new_tokens=12)  # keyword wins
    assert len(a.token_ids) == 8 and len(b.token_ids) == 12 and b.token_ids[:8] == a.token_ids
    per_prompt = engine.generate(["Once", "Once"], [params, params.replace(max_new_tokens=3)])
    assert [len(r.token_ids) for r in per_prompt] == [8, 3]


def test_seeded_sampling_repeats(engine):
    kw = dict(max_new_tokens=32, temperature=1.0, top_p=0.9, seed=1234)
    assert engine.generate("Once upon a time", **kw).token_ids == engine.generate("Once upon a time", **kw).token_ids


def test_stop_string(engine):
    full = engine.generate("Once upon a time", max_new_tokens=60, temperature=0)
    assert "." in full.text
    cut = engine.generate("Once upon a time", max_new_tokens=60, temperature=0, stop=".")
    assert cut.finish_reason == "stop" and cut.stop_reason == "."
    assert cut.text == full.text[:full.text.index(".")]


def test_streaming_equals_generate(engine):
    whole = engine.generate("Lily and Ben went to the park", max_new_tokens=40, temperature=0)
    chunks = list(engine.generate_stream("Lily and Ben went to the park", max_new_tokens=40, temperature=0))
    assert chunks and all(isinstance(c, GenerationChunk) for c in chunks)
    assert len(chunks) > 1, "a 40-token request should stream in several chunks"
    assert [c.finished for c in chunks] == [False] * (len(chunks) - 1) + [True]
    assert chunks[-1].finish_reason == "length" and chunks[-1].output_tokens == 40
    assert "".join(c.text for c in chunks) == whole.text
    assert [t for c in chunks for t in c.token_ids] == whole.token_ids
    via_flag = engine.generate("Lily and Ben went to the park", max_new_tokens=40, temperature=0, stream=True)
    assert [t for c in via_flag for t in c.token_ids] == whole.token_ids


def test_stream_errors_raise_at_the_call(engine):
    with pytest.raises(minfer.MinferError, match="outside the vocabulary"):
        engine.generate_stream([1, 100000])


def test_leaving_a_stream_early_aborts_it(engine):
    before = engine.stats()["requests_finished"]
    stream = engine.generate_stream("Once upon a time", max_new_tokens=400, temperature=0, ignore_eos=True)
    first = next(stream)
    assert not first.finished
    stream.close()
    rest = list(stream)  # the abort's final chunk, if it had not finished by itself
    assert rest and rest[-1].finished and rest[-1].finish_reason in ("abort", "length")
    assert engine.stats()["requests_finished"] >= before
    assert len(engine.generate("Once", max_new_tokens=4, temperature=0).token_ids) == 4


def test_tokenizer_round_trip(engine):
    tok = engine.tokenizer
    text = "Once upon a time, there was a little girl named Lily."
    ids = tok.encode(text)
    assert ids[0] == tok.bos_token_id == 1
    assert tok.encode(text, add_special_tokens=False) == ids[1:]
    assert tok.decode(ids, skip_special_tokens=True) == text
    assert tok.decode(ids[1:]) == text
    assert tok.vocab_size == 512 and 2 in tok.eos_token_ids
    with pytest.raises(minfer.MinferError):
        tok.decode([100000])
    with pytest.raises(TypeError, match="token_ids must be a list"):
        tok.decode("hello")


def settled_stats(engine):
    """engine.stats() once nothing is running or waiting: after an interrupted call the aborts it sent are
    carried out by the engine thread a moment later."""
    deadline = time.monotonic() + 60
    while True:
        s = engine.stats()
        if s["num_running"] == 0 and s["num_waiting"] == 0 or time.monotonic() > deadline:
            return s
        time.sleep(0.005)


def test_stats(engine):
    # stats() is published before a step's outputs are handed out, so it counts everything generate() returned.
    before = engine.stats()
    engine.generate(PROMPTS[:2], max_new_tokens=10, temperature=0)
    after = engine.stats()
    assert isinstance(after, dict)
    for key in ("num_running", "num_waiting", "pages_total", "pages_used", "pages_free", "kv_utilisation",
                "prefix_cache_hit_rate", "num_preemptions", "prompt_tokens", "generated_tokens", "num_steps",
                "requests_finished", "max_model_len"):
        assert key in after, key
    assert after["generated_tokens"] - before["generated_tokens"] == 20
    assert after["requests_finished"] - before["requests_finished"] == 2
    assert after["num_running"] == 0 and after["pages_total"] > 0 and after["max_model_len"] == 512


def test_threads_generate_concurrently_with_sequential_results(engine):
    """Several Python threads call generate() on one engine at once (the GIL is released while they wait);
    at temperature 0 each gets exactly what it gets alone."""
    jobs = [(p, n) for n in (12, 30) for p in PROMPTS]
    expected = {job: engine.generate(job[0], max_new_tokens=job[1], temperature=0).token_ids for job in jobs}
    got, errors = {}, []
    barrier = threading.Barrier(len(jobs))

    def worker(job):
        try:
            barrier.wait()
            got[job] = engine.generate(job[0], max_new_tokens=job[1], temperature=0).token_ids
        except Exception as e:  # noqa: BLE001  (reported below)
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(job,)) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    assert not any(t.is_alive() for t in threads), "a generate() call did not return"
    assert got == expected


def test_threads_stream_concurrently(engine):
    expected = engine.generate(PROMPTS, max_new_tokens=20, temperature=0)
    got = [None] * len(PROMPTS)

    def worker(i):
        got[i] = [t for c in engine.generate_stream(PROMPTS[i], max_new_tokens=20, temperature=0) for t in c.token_ids]

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(PROMPTS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert got == [r.token_ids for r in expected]


def test_ctrl_c_interrupts_generate_and_aborts_its_requests(engine):
    """A signal reaches a thread waiting in generate() (the wait is sliced) and its requests are aborted."""
    def interrupt(*_):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.2)
    try:
        engine.generate([[1]] * 64, max_new_tokens=400, temperature=0, ignore_eos=True)
        interrupted = False
    except KeyboardInterrupt:
        interrupted = True
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    if not interrupted:
        pytest.skip("the batch finished before the signal came")
    settled = settled_stats(engine)
    assert settled["num_running"] == 0 and settled["num_waiting"] == 0
    assert len(engine.generate("Once", max_new_tokens=4, temperature=0).token_ids) == 4
