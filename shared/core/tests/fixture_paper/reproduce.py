import logging
import warnings

from iclr26_core.report import Claim, Results


def run(cfg, ctx):
    import torch

    x = torch.randn(cfg.n, generator=torch.Generator().manual_seed(cfg.seed))
    (ctx.run_dir / "partial.txt").write_text("written before a possible failure")
    if cfg.fail:
        raise RuntimeError("boom")
    if cfg.chatter:
        warnings.warn_explicit("a library's notice", UserWarning, "/site-packages/somelib/core.py", 7)
        warnings.warn("an API is deprecated", FutureWarning, stacklevel=1)
        logging.getLogger("somelib").warning("kernel loaded")
        ctx.peers_missing(["peer-a", "peer-b"])
        ctx.peers_missing(["peer-a"])  # reported once
    mean = float(x.mean())
    bound = 3 / cfg.n**0.5
    return Results(
        claims=[
            Claim("C1", "the sample mean is near 0", 0.0, mean, abs(mean) <= bound, f"|mean| <= {bound:.3g}")
        ],
        metrics={"n": cfg.n, "mean": mean, "threads": torch.get_num_threads()},
    )
