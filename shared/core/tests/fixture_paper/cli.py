from iclr26_core.cli import Verb, paper_cli


def _args(p):
    p.add_argument("--name", required=True)
    p.add_argument("--model", default=None)


app = paper_cli(
    slug="fixture_paper",
    title="A fixture paper",
    reproduce="fixture_paper.reproduce:run",
    verbs=[Verb("hello", "say hello", run="fixture_paper.commands:hello", arguments=_args)],
    conf_module="fixture_paper.conf",
    dist="iclr26-fixture-paper",
    model_key="lm.model",
    peers_key="bench",
)
bare = paper_cli(  # a paper with no user model and no peers switch
    slug="fixture_paper",
    title="A fixture paper",
    reproduce="fixture_paper.reproduce:run",
    conf_module="fixture_paper.conf",
    dist="iclr26-fixture-paper",
)
main = app
