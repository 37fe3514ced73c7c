"""Training: run config and derivation (``config``), the one ``key=value`` settings parser
(``settings``), the DeepSpeed engine and the normalised optimizer step (``engine``, the only deepspeed
import; its deepspeed-free parts: ``optim``, ``process``), crash-safe checkpoints (``checkpoint``), and the wiring
every recipe shares (``loop``: settings checked before any work, corpora -> streams, held-out
validation of every head, the step loop, logs, clean exits; recipes/pretrain_code.py is its user).

Importing this package imports nothing heavy; ``codept.train.engine`` loads DeepSpeed, and
``codept.train.checkpoint`` imports it only inside ``save``/``load`` (which take an engine), so
``checkpoint.latest_tag`` and ``codept.train.export`` (ZeRO 0-2 weights) work without DeepSpeed. The order of calls underneath (``codept.train.loop.train`` runs the loop part)::

    world = engine.init_distributed()
    checkpoint.seed_all(cfg.seed)                      # same model init on every rank
    model = ...                                        # returns per-head (loss_sum, n_valid) via loss_fn
    eng = engine.build_engine(model, cfg, world)       # batch keys / AdamW / schedule derived + injected
    checkpoint.seed_all(cfg.seed, world.rank)          # per-rank dropout streams
    resume = checkpoint.load(eng, cfg.out_dir)         # None on a fresh run
    stream = PackedStream(Mixture(...), ..., rank=world.rank, world=world.world_size)
    if resume: stream.load_state_dict(resume.stream_state(world))  # re-split on another world size
    rows = checkpoint.resume_iterator(stream, resume)  # starts the iterator, THEN restores RNG
    for step in range(resume.step if resume else 0, cfg.steps):
        micro = [collate([next(rows) for _ in range(cfg.micro_batch_rows)]) for _ in range(k)]
        logs = engine.train_step(eng, micro, loss_fn)
        if (step + 1) % cfg.save_every == 0 or step + 1 == cfg.steps:
            checkpoint.save(eng, cfg.out_dir, step + 1, {"stream": stream.state_dict()}, config=cfg,
                            keep_last=cfg.keep_last)
    engine.shutdown()
"""
