from iclr26_core.report import Claim, Results


def run(cfg, ctx):
    import torch

    x = torch.randn(cfg.scale.n, generator=torch.Generator().manual_seed(cfg.seed))
    (ctx.run_dir / "partial.txt").write_text("written before a possible failure")
    if cfg.fail:
        raise RuntimeError("boom")
    mean = float(x.mean())
    bound = 3 / cfg.scale.n**0.5
    return Results(
        claims=[
            Claim("C1", "the sample mean is near 0", 0.0, mean, abs(mean) <= bound, f"|mean| <= {bound:.3g}")
        ],
        metrics={"n": cfg.scale.n, "mean": mean},
    )
