"""Every installed paper package honours the shared CLI keys (workspace 0.3): ``model=<id or path>`` sets the
package's model key (at scale=paper, where every model-taking package reads it), ``peers=true|false`` sets its
peers switch, an added unknown key is refused, and a wrong model path answers with one line.

Marked slow: it needs every paper installed, which is the full environment of `make test-slow` (in CI's
isolation stage the core is installed alone)."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from iclr26_core.cli import installed_papers
from iclr26_core.errors import UserError

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def papers():
    found = installed_papers()
    if len(found) < 19:
        pytest.fail(f"expected the 19 paper packages installed, found {sorted(found)}")
    return found


def test_every_paper_maps_model_and_peers(papers, tmp_path):
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    takes_model, has_peers = [], []
    for slug, app in papers.items():
        if app.model_key:
            cfg = app.compose(["scale=paper", f"model={folder}"])
            value = OmegaConf.select(cfg, app.model_key)
            got = list(value) if OmegaConf.is_list(value) else [value]
            assert got == [str(folder)], (slug, app.model_key, value)
            takes_model.append(slug)
            with pytest.raises(UserError, match="does not exist"):
                app.compose(["scale=paper", "model=./does-not-exist"])
        else:
            with pytest.raises(UserError, match="takes no user model"):
                app.compose(["model=x"])
        if app.peers_key:
            for flag in (True, False):
                cfg = app.compose([f"peers={str(flag).lower()}"])
                assert OmegaConf.select(cfg, app.peers_key) is flag, (slug, app.peers_key)
            has_peers.append(slug)
        with pytest.raises(UserError, match="unknown key"):
            app.compose(["+nosuchkey=1"])
    # the packages whose reproduce runs on a user's model, and those with peer libraries, as of 0.3
    assert {"bof4", "obr", "pmkvq", "sprig", "reasoning_data", "calgacus", "safemoe"} <= set(takes_model)
    assert len(has_peers) >= 16, has_peers
