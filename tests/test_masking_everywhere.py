"""No credential leaves the tool, in any form or through any output, and names that only
look like a credential's stay readable.

Properties first through the masking functions (many examples): a credential under a name of
every style, in every text form a log prints it (argument dumps, environment echo lines,
Python and JSON dicts, flags, URLs), in every token shape, nested in a W&B config, and a value
holding `:` or `;` masked whole. Then end to end through the command line (a few examples,
each through every command): a Megatron log and a W&B run carrying all of those forms at once,
and every output grepped for every piece of every credential: `summary` text, `--json` and
`--markdown`, `report`, `compare` (text, JSON, HTML), `export` (every file it writes), `index`
(stdout, stderr and every file of the dataset, Parquet read back with polars) and `fleet`
(text, JSON, HTML).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from loganalyzer.cli import main
from loganalyzer.parsers.wandb import remote
from loganalyzer.secrets import MASK, mask_config, mask_secrets, mask_text, secret_name
from tests.bad_inputs import BAD

# A credential's pieces: a fixed head that no output holds by chance, then random letters and
# digits. Each piece is grepped for on its own.
piece = st.from_regex(r"[A-Za-z0-9]{6,20}", fullmatch=True).map(lambda s: f"Qz8{s}")

# Names of credentials, as words; each is spelled in every style.
CREDENTIAL_NAMES = (
    ("wandb", "api", "key"),
    ("hub", "token"),
    ("db", "password"),
    ("passphrase",),
    ("auth",),
    ("cookie",),
    ("db", "pwd"),
    ("pwd",),
    ("client", "secret"),
    ("storage", "account", "key"),
    ("aws", "secret", "access", "key"),
    ("oauth",),
    ("smtp", "passwd"),
    ("api", "credentials"),
)
STYLES = ("snake", "kebab", "camel", "pascal", "upper", "dotted")


def spelled(words: tuple[str, ...], style: str) -> str:
    if style == "snake":
        return "_".join(words)
    if style == "kebab":
        return "-".join(words)
    if style == "camel":
        return words[0] + "".join(w.title() for w in words[1:])
    if style == "pascal":
        return "".join(w.title() for w in words)
    if style == "upper":
        return "_".join(words).upper()
    return ".".join(words)


# How a log prints a name and its value: environment echo lines, argument dumps (Megatron's,
# argparse's Namespace, a dict), flags, YAML.
TEXT_FORMS = (
    "{name}={value}",
    'export {name}="{value}"',
    "{name}: {value}",
    "  {name} ........................................ {value}",
    "--{name} {value} --lr 1e-4",
    "--{name}={value}",
    "Namespace({name}='{value}', lr=0.0001)",
    "{{'{name}': '{value}', 'lr': 0.0001}}",
    '{{"{name}": "{value}"}}',
)
# Names that only look like a credential's, with values that must stay readable.
LOOK_ALIKES = {
    "tokenizer_type": "GPT2BPETokenizer",
    "tokens_per_iteration": 4096,
    "max_position_embeddings": 4096,
    "author": "alice-in-the-lab",
    "authors": "alice and bob",
    "auto_resume": "enabled-always",
    "pwd_dir": "/scratch/alice/run",
    "PWD": "/home/alice/megatron",
    "OLDPWD": "/home/alice",
    "pad_token": "<|endoftext|>",
    "eos_token": "<|endoftext|>",
    "sort_key": "validation_loss",
    "monkey_patch": "apex-fused-layer-norm",
    "keyboard_layout": "dvorak-programmer",
    "token_dropping": "capacity-factor",
    "num_tokens": 1000000,
    "git_hash": "89abcdef0123456789abcdef0123456789abcdef",
    "use_auth_token": True,
}


@dataclass(frozen=True)
class Secret:
    """One credential as written, and the pieces of it no output may hold."""

    written: str
    pieces: tuple[str, ...]


@st.composite
def shaped_tokens(draw: st.DrawFn) -> Secret:
    """A token in one of the shapes that give it away wherever it is."""
    alnum = st.text("ABCDEFGHJKLMNPQRSTUVWXYZabcdefghjkmnpqrstuvwxyz23456789", min_size=1)
    kind = draw(st.sampled_from(("github_pat", "google", "npm", "slack", "azure", "sas", "pem")))
    body = draw(alnum.map(lambda s: (s * 100)[:59]))
    if kind == "github_pat":
        token = f"github_pat_11ABCDEFG0{body[:12]}_{body}"
        return Secret(token, (token[11:],))
    if kind == "google":
        token = f"AIzaSy{body[:33]}"
        return Secret(token, (token[4:],))
    if kind == "npm":
        token = f"npm_{body[:36]}"
        return Secret(token, (token[4:],))
    if kind == "slack":
        path = f"T0AB12CD/B0EF34GH/{body[:24]}"
        return Secret(f"https://hooks.slack.com/services/{path}", (body[:24],))
    if kind == "azure":
        key = f"{body[:40]}+/{body[:44]}=="
        written = (
            "DefaultEndpointsProtocol=https;AccountName=alicestore;"
            f"AccountKey={key};EndpointSuffix=core.windows.net"
        )
        return Secret(written, (key[:40], key[42:]))
    if kind == "sas":
        sig = f"{body[:43]}%3D"
        written = (
            "https://alicestore.blob.core.windows.net/ckpt/model.pt?sv=2022-11-02&ss=b"
            f"&srt=o&sp=r&se=2030-01-01T00:00:00Z&sig={sig}"
        )
        return Secret(written, (body[:43],))
    lines = [f"b3BlbnNzaC1rZXktdjEAAAAA{body[:40]}", f"{body[10:50]}AAAAB3NzaC1yc2E"]
    written = "-----BEGIN OPENSSH PRIVATE KEY-----\n{}\n-----END OPENSSH PRIVATE KEY-----"
    return Secret(written.format("\n".join(lines)), tuple(lines))


@st.composite
def whole_values(draw: st.DrawFn) -> Secret:
    """A value with `:`, `;` or `,` in it: masked whole, not to its first separator."""
    parts = draw(st.lists(piece, min_size=1, max_size=3))
    separators = draw(st.lists(st.sampled_from(":;,@"), min_size=2, max_size=2))
    written = parts[0]
    for separator, part in zip(separators, parts[1:], strict=False):
        written += separator + part
    return Secret(written, tuple(parts))


def leaks(text: str, secrets: list[Secret]) -> list[str]:
    return [p for s in secrets for p in s.pieces if p in text]


def _contexts(text: str, secrets: list[Secret]) -> list[str]:
    """Each leaked piece with the text around it, to see the channel it came through."""
    return [text[max(0, text.index(p) - 60) : text.index(p) + len(p)] for p in leaks(text, secrets)]


@settings(deadline=None, max_examples=300)
@given(
    words=st.sampled_from(CREDENTIAL_NAMES),
    style=st.sampled_from(STYLES),
    form=st.sampled_from(TEXT_FORMS),
    value=whole_values(),
)
def test_a_named_value_is_masked_whole_in_every_style_and_form(
    words: tuple[str, ...], style: str, form: str, value: Secret
) -> None:
    name = spelled(words, style)
    if form.startswith("--") and style in ("upper", "dotted"):
        name = name.lower()  # flags are lower case
    text = form.format(name=name, value=value.written)
    masked = mask_text(f"[rank0]: {text}")
    assert not leaks(masked, [value]), (text, masked)
    assert MASK in masked
    assert mask_text(masked) == masked  # outputs masked twice say the same
    assert mask_text(repr(masked)) == repr(masked)
    assert secret_name(name)
    config = {name: value.written, "note": f"see {value.written}"}
    assert not leaks(json.dumps(mask_config(config, {})), [value])


@settings(deadline=None, max_examples=200)
@given(token=shaped_tokens(), before=st.sampled_from(("", "url ", "'", "value=")))
def test_a_token_its_shape_gives_away_is_masked_anywhere(token: Secret, before: str) -> None:
    text = f"{before}{token.written} trailing text"
    assert not leaks(mask_text(text), [token]), mask_text(text)
    assert not leaks(json.dumps(mask_secrets({"anything": text}, {})), [token])


@settings(deadline=None, max_examples=200)
@given(
    token=piece,
    password=piece,
    words=st.sampled_from(CREDENTIAL_NAMES),
    style=st.sampled_from(STYLES),
    depth=st.integers(1, 3),
)
def test_a_nested_w_and_b_config_is_masked_within(
    token: str, password: str, words: tuple[str, ...], style: str, depth: int
) -> None:
    inner: object = {
        spelled(words, style): token,
        "url": f"https://alice:{password}@git.example.com/team/repo.git",
        "flags": [1, 2],
    }
    for level in range(depth):
        inner = {f"level{level}": inner, "items": [inner]}
    config = {"hub": inner, **LOOK_ALIKES}
    masked = mask_config(config, {})
    shown = json.dumps(masked)
    assert token not in shown and password not in shown
    assert {name: masked[name] for name in LOOK_ALIKES} == LOOK_ALIKES


def test_look_alike_names_stay_readable_in_text() -> None:
    text = " ".join(f"{name}={value}" for name, value in LOOK_ALIKES.items())
    assert mask_text(text) == text
    for name in set(LOOK_ALIKES) - {"PWD", "use_auth_token"}:  # readable by their values
        assert not secret_name(name), name


@pytest.mark.parametrize(
    ("name", "masked"),
    [
        ("wandbApiKey", True),
        ("hubToken", True),
        ("HF_TOKEN", True),
        ("X-Api-Key", True),
        ("AccountKey", True),
        ("OAuthToken", True),
        ("db_pwd", True),
        ("session_cookie", True),
        ("hf_token_2", True),
        ("password2", True),
        ("author", False),
        ("authors", False),
        ("auto", False),
        ("pwd_dir", False),
        ("OLDPWD", False),
        ("tokenizer_type", False),
        ("tokens_per_iteration", False),
        ("max_position_embeddings", False),
        ("pad_token", False),
        ("bos_token", False),
        ("monkey", False),
    ],
)
def test_names_by_their_last_word(name: str, masked: bool) -> None:
    assert secret_name(name) is masked


def test_a_lone_pwd_is_a_password_unless_it_is_the_working_directory() -> None:
    """The shell sets PWD to the working directory: an environment dump keeps it readable,
    while `pwd: …` in a config is a password."""
    assert mask_config({"PWD": "/home/alice", "pwd": "hunter2-hunter2"}, {}) == {
        "PWD": "/home/alice",
        "pwd": MASK,
    }
    assert mask_text("PWD=/home/alice pwd=hunter2-hunter2") == f"PWD=/home/alice pwd={MASK}"


# --- end to end -------------------------------------------------------------------------------

GPU = ("--gpu", "h100-sxm", "--num-gpus", "8")
ITERATION = (
    " [2025-01-02 03:{minute:02d}:{second:02d}] iteration {it:8d}/  100000 | consumed samples:"
    " {samples:12d} | elapsed time per iteration (ms): {ms:.1f} | throughput per GPU"
    " (TFLOP/s/GPU): 180.3 | learning rate: 1.000000E-04 | global batch size:   128 | lm loss:"
    " 7.123456E+00 | loss scale: 1.0 | grad norm: 1.234 | number of skipped iterations:   0 |"
    " number of nan iterations:   0 |"
)


@dataclass(frozen=True)
class Planted:
    """What one example plants, and where."""

    arguments: dict[str, str]  # argument dump: name -> value
    changed: dict[str, str]  # the same names' values in a second dump (a warning quotes them)
    lines: list[str]  # other lines of the log (environment echo, URLs, tokens)
    wandb_config: dict[str, object]
    environment: dict[str, str]
    secrets: list[Secret]


@st.composite
def planted(draw: st.DrawFn) -> Planted:
    secrets: list[Secret] = []
    arguments: dict[str, str] = {}
    changed: dict[str, str] = {}
    for words in CREDENTIAL_NAMES:
        name = spelled(words, draw(st.sampled_from(STYLES)))
        if name.upper() == "PWD":
            name = "pwd"  # as a Megatron argument; the shell's PWD is a path
        value, other = draw(whole_values()), draw(whole_values())
        arguments[name], changed[name] = value.written, other.written
        secrets += [value, other]
    lines = []
    for form in TEXT_FORMS:
        value = draw(whole_values())
        name = spelled(draw(st.sampled_from(CREDENTIAL_NAMES)), "snake")
        lines.append(form.format(name=name, value=value.written))
        secrets.append(value)
    for _ in range(4):
        token = draw(shaped_tokens())
        lines.extend(token.written.splitlines())
        secrets.append(token)
    url = draw(piece)
    lines.append(f"cloning https://alice:{url}@git.example.com/team/megatron.git")
    secrets.append(Secret(url, (url,)))
    token, password, pem = draw(piece), draw(piece), draw(shaped_tokens())
    named = spelled(draw(st.sampled_from(CREDENTIAL_NAMES)), draw(st.sampled_from(STYLES)))
    if named.upper() == "PWD":
        named = "pwd"  # `PWD` is among the look-alikes below (the shell's, a path)
    wandb_config: dict[str, object] = {
        "num_layers": 4,
        "hidden_size": 256,
        "num_attention_heads": 4,
        "hub": {"token": token, "url": f"https://alice:{password}@h.example.com/x"},
        "deploy": [{"key_file": pem.written}],
        "ssh_private_key": pem.written,
        named: draw(piece),
        **{k: v for k, v in LOOK_ALIKES.items() if not isinstance(v, bool)},
    }
    secrets += [Secret(token, (token,)), Secret(password, (password,)), pem]
    secrets.append(Secret(str(wandb_config[named]), (str(wandb_config[named]),)))
    environment = {"WANDB_API_KEY": draw(piece), "HF_TOKEN": draw(piece)}
    secrets += [Secret(v, (v,)) for v in environment.values()]
    # the environment's values are printed by the log too (an `env` dump)
    lines += [f"{k}={v}" for k, v in environment.items()]
    return Planted(arguments, changed, lines, wandb_config, environment, secrets)


def _dump(arguments: dict[str, str]) -> list[str]:
    plain = {
        "global_batch_size": "128",
        "hidden_size": "2048",
        "num_attention_heads": "16",
        "num_layers": "24",
        "seq_length": "2048",
        "micro_batch_size": "1",
        "bf16": "True",
        "world_size": "8",
        **{k: str(v) for k, v in LOOK_ALIKES.items()},
    }
    every = {**plain, **arguments}
    return [
        "------------------------ arguments ------------------------",
        *(f"  {name} {'.' * max(3, 48 - len(name))} {value}" for name, value in every.items()),
        "-------------------- end of arguments ---------------------",
    ]


def _write_log(folder: Path, plant: Planted) -> Path:
    """A Megatron log (the argument dump's form as Megatron prints it; fixtures/bad/
    secret_in_config.log), restarted with changed credentials, and the other lines between."""
    lines = [*plant.lines, *_dump(plant.arguments)]
    for it in range(10, 210, 10):
        ms = 1617.2 if it != 150 else 9000.0  # one slow step: its line is quoted
        lines.append(
            ITERATION.format(minute=it // 60, second=it % 60, it=it, samples=it * 128, ms=ms)
        )
        if it == 100:
            lines += _dump(plant.changed)
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "train.log"
    log.write_text("\n".join(lines) + "\n")
    return log


def _write_wandb(cache: Path, plant: Planted, run_id: str) -> str:
    """A finished W&B run in loganalyzer's cache, as a pull leaves it (read without network)."""
    history = [
        {"_step": i, "_runtime": 1.5 * i, "_timestamp": 1.7e9 + 1.5 * i, "train/loss": 5 - i / 100}
        for i in range(1, 41)
    ]
    pulled = remote.Pulled(
        "finished",
        "2025-01-01T00:00:00",
        dict(plant.wandb_config),
        {},
        {"gpu": "NVIDIA H100 80GB HBM3", "gpu_count": 8},
        history,
    )
    ref = remote.RunRef("team", "proj", run_id)
    remote._write_cache(ref, pulled)
    assert remote._read_cache(ref) is not None
    return f"wandb:team/proj/{run_id}"


def _text_of(path: Path) -> str:
    """A file as text: a Parquet file's every column (names and values) read with polars."""
    if path.suffix == ".parquet":
        frame = pl.read_parquet(path)
        return json.dumps([frame.columns, frame.to_dicts()], default=str)
    return path.read_text(encoding="utf-8", errors="replace")


@settings(
    deadline=None,
    max_examples=3,
    phases=(Phase.explicit, Phase.reuse, Phase.generate),  # a failure is shown, not shrunk
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(plant=planted())
def test_no_output_of_any_command_holds_a_credential(
    plant: Planted, tmp_path_factory: pytest.TempPathFactory
) -> None:
    root = tmp_path_factory.mktemp("masking")
    cache = root / "cache"
    env = {"XDG_CACHE_HOME": str(cache), **plant.environment}
    runner = CliRunner(env=env)
    outputs: dict[str, str] = {}

    def run(name: str, *args: str) -> None:
        result = runner.invoke(main, list(args))
        assert result.exit_code == 0, (name, result.output, result.exception)
        outputs[name] = result.stdout + "\n" + result.stderr

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(cache))
        wandb_run = _write_wandb(cache, plant, "abc123")
        _write_wandb(cache, plant, "def456")
    log = _write_log(root / "logs" / "run1", plant)
    out = root / "out"
    out.mkdir()
    for source, tag in ((str(log), "log"), (wandb_run, "wandb")):
        run(f"summary {tag}", "summary", source, *GPU)
        run(f"summary --json {tag}", "summary", source, "--json", *GPU)
        run(f"summary --markdown {tag}", "summary", source, "--markdown", *GPU)
        run(f"report {tag}", "report", source, "-o", str(out / f"report-{tag}.html"), *GPU)
        run(f"export {tag}", "export", source, "-o", str(out / f"steps-{tag}.csv"))
        run(f"export parquet {tag}", "export", source, "-o", str(out / f"steps-{tag}.parquet"))
        metrics = str(out / f"metrics-{tag}.jsonl")
        run(f"export metrics {tag}", "export", source, "--metrics", "-o", metrics)
    run("compare", "compare", str(log), wandb_run, "-o", str(out / "compare.html"), *GPU)
    run("compare --json", "compare", str(log), wandb_run, "--json", *GPU)
    references = root / "wandb-runs.txt"
    references.write_text(f"{wandb_run}\nwandb:team/proj/def456\n")
    dataset = root / "dataset"
    index = ("index", str(root / "logs"), str(references), "--out", str(dataset), *GPU)
    run("index", *index, "--reports", "--jobs", "1", "--json")
    run("fleet", "fleet", str(dataset))
    run("fleet --json", "fleet", str(dataset), "--json")
    run("fleet -o", "fleet", str(dataset), "-o", str(out / "fleet.html"))
    files = [p for p in [*out.rglob("*"), *dataset.rglob("*")] if p.is_file()]
    assert any(p.name == "runs.parquet" for p in files)
    assert sum(p.name == "report.html" for p in files) == 3
    outputs.update({str(p): _text_of(p) for p in files})
    found = {where: _contexts(text, plant.secrets) for where, text in outputs.items()}
    assert {where: shown for where, shown in found.items() if shown} == {}
    # and what must stay readable does
    config = pl.read_parquet(dataset / "runs.parquet")["config"].to_list()
    assert any('"tokenizer_type": "GPT2BPETokenizer"' in (c or "") for c in config)
    assert any('"author": "alice-in-the-lab"' in (c or "") for c in config)
    assert "89abcdef0123456789abcdef0123456789abcdef" in outputs[str(out / "report-log.html")]


def test_a_line_of_a_references_file_is_quoted_masked(tmp_path: Path) -> None:
    key = "0123456789abcdef0123456789abcdef01234567"
    references = tmp_path / "runs.txt"
    references.write_text(
        f"wandb:team/proj/abc123\nexport WANDB_API_KEY={key}\nwandb:team/proj/def456\n"
    )
    result = CliRunner().invoke(
        main, ["index", str(references), "--out", str(tmp_path / "ds"), "--jobs", "1"]
    )
    assert result.exit_code == 1
    assert "line 2: 'export WANDB_API_KEY=***' is no W&B run reference" in result.stderr
    assert key not in result.output


def test_the_dataset_config_column_is_masked(tmp_path: Path) -> None:
    """runs.parquet's `config` kept every value as logged: a 40-hex `wandb_api_key`, nested
    tokens, credential-named environment values."""
    folder = tmp_path / "runs" / "a"
    folder.mkdir(parents=True)
    log = (BAD / "secret_in_config.log").read_text()
    folder.joinpath("train.log").write_text(log.replace("exp_name", "hubToken", 1))
    dataset = tmp_path / "ds"
    result = CliRunner(env={"WANDB_API_KEY": "planted-env-secret-value-123"}).invoke(
        main, ["index", str(tmp_path / "runs"), "--out", str(dataset), "--jobs", "1", *GPU]
    )
    assert result.exit_code == 0, result.output
    (config,) = pl.read_parquet(dataset / "runs.parquet")["config"].to_list()
    values = json.loads(config)
    assert values["wandb_api_key"] == MASK
    assert values["hubToken"] == MASK
    assert values["hidden_size"] == 2048
    for secret in (
        "0123456789abcdef0123456789abcdef01234567",
        "fedcba9876543210fedcba9876543210fedcba98",
        "planted-env-secret-value-123",
    ):
        assert secret not in config
