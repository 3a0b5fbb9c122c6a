"""`vramtui offers import`: the CSV/JSON schema, the Lambda and vast.ai adapters (from the
fixtures in tests/data/offers/), bad rows, re-import, limits, atomic writes; price dates and
the "price to re-check" flag in the lists, --detail, JSON and the app; sample offers marked."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from vramtui.catalog import load_catalog
from vramtui.cli import main
from vramtui.offer_import import command as import_command
from vramtui.gpu_match import GpuMatchError, match_gpu
from vramtui.offer_import.writer import MAX_ID_CHARS

DATA = Path(__file__).resolve().parent / "data" / "offers"
LAMBDA = DATA / "lambda_instance_types.json"
VAST = DATA / "vast_search_offers_raw.json"
# Verbatim excerpts of responses recorded by others (tests/data/offers/README.md says where).
LAMBDA_RECORDED = DATA / "lambda_recorded_lambda-ai-cloud-api-client.json"
VAST_RECORDED = DATA / "vast_recorded_uit-docs-agent.json"
DATES = ["--seen-on", "2026-12-01", "--today", "2026-12-02"]

HEADER = "provider,gpu,gpu_count,price,currency,billing_unit,region,seen_on,source_url\n"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def offers_in(root: Path) -> dict:
    """The offers the catalogue loads from `root` (built-ins excluded), by id."""
    catalog = load_catalog(root)
    assert catalog.problems == (), catalog.problems
    return {
        oid: o
        for oid, o in catalog.offers.items()
        if o.file and (root / "offers" / o.file).exists()
    }


def refused_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("vramtui: refused")]


# ------------------------------------------------------------------------ the import schema


def test_csv_schema_rows_become_offers_with_converted_prices(tmp_path, capsys):
    src = write(
        tmp_path,
        "offers.csv",
        HEADER
        + "Acme GPU,RTX 4090,1,0.44,USD,hour,EU-West,2026-11-30,https://acme.example/pricing\n"
        # 0.000125 USD per second x 3600 = 0.45 USD per hour
        + "Acme GPU,L40S,2,0.000125,usd,second,EU-West,2026-11-30,https://acme.example/pricing\n"
        # billed by the month: one purchase covers 720 h; 900 / 720 = 1.25 USD/h
        + "Acme GPU,a100-80gb-sxm,1,900,EUR,month,,2026-11-30,\n",
    )
    code, out, err = run(
        capsys, "offers", "import", str(src), "--catalog", str(tmp_path), "--today", "2026-12-02"
    )
    assert code == 0, err
    assert "format: csv" in out and "detected" in out
    offers = offers_in(tmp_path)
    assert set(offers) == {
        "acme-gpu-rtx-4090-x1-eu-west",
        "acme-gpu-l40s-x2-eu-west",
        "acme-gpu-a100-80gb-sxm-x1",
    }
    o = offers["acme-gpu-rtx-4090-x1-eu-west"]
    assert (o.gpu, o.gpu_count, o.region) == ("rtx-4090", 1, "EU-West")
    assert [(p.kind, p.hours, p.price, p.currency) for p in o.plans] == [("hourly", 1, 0.44, "USD")]
    assert str(o.seen_on) == "2026-11-30" and str(o.evidence[0].date) == "2026-11-30"
    assert o.evidence[0].source == "https://acme.example/pricing"
    per_second = offers["acme-gpu-l40s-x2-eu-west"].plans[0]
    assert (per_second.kind, per_second.hours, per_second.currency) == ("hourly", 1, "USD")
    assert per_second.price == pytest.approx(0.45)
    assert "0.000125 USD/second = 0.45 USD/h (converted)" in out
    monthly = offers["acme-gpu-a100-80gb-sxm-x1"].plans[0]
    assert (monthly.kind, monthly.hours, monthly.price, monthly.currency) == (
        "monthly",
        720,
        900,
        "EUR",
    )
    assert "900.00 EUR/month (720 h per purchase; 1.25 EUR/h)" in out
    # No source_url: the evidence names the file it came from.
    assert "offers.csv" in offers["acme-gpu-a100-80gb-sxm-x1"].evidence[0].source


def test_json_schema_with_host_fields(tmp_path, capsys):
    src = write(
        tmp_path,
        "offers.json",
        json.dumps(
            {
                "offers": [
                    {
                        "provider": "Acme GPU",
                        "gpu": "NVIDIA H100 80GB HBM3",  # an NVML name
                        "gpu_count": 8,
                        "price": 19.6,
                        "currency": "USD",
                        "interconnect": "nvlink",
                        "storage_gb": 30720,
                        "host_ram_gb": 2048,
                        "vcpus": 192,
                        "region": "us-east",
                        "seen_on": "2026-11-28",
                        "title": "8 x H100 SXM (HGX)",
                    }
                ]
            }
        ),
    )
    code, out, err = run(
        capsys, "offers", "import", str(src), "--catalog", str(tmp_path), "--today", "2026-12-02"
    )
    assert code == 0, err
    assert "format: json" in out
    (o,) = offers_in(tmp_path).values()
    assert o.id == "acme-gpu-h100-sxm-x8-us-east-nvlink"
    assert (o.gpu, o.gpu_count, o.interconnect) == ("h100-sxm", 8, "nvlink")
    assert (o.disk_gb, o.host_ram_gb, o.vcpus, o.title) == (30720, 2048, 192, "8 x H100 SXM (HGX)")
    assert o.plans[0].price == 19.6


# ------------------------------------------------------------------------------- adapters


def test_lambda_adapter_from_the_recorded_response(tmp_path, capsys):
    code, out, err = run(
        capsys, "offers", "import", str(LAMBDA), "--catalog", str(tmp_path), *DATES
    )
    assert "format: lambda (Lambda Cloud API GET /api/v1/instance-types; detected)" in out
    offers = offers_in(tmp_path)
    # gpu_description -> catalogue id; price_cents_per_hour / 100 = USD per hour.
    expected = {
        "lambda-a100-40gb-sxm-x1": ("a100-40gb-sxm", 1, 1.29),
        "lambda-a10-x1": ("a10", 1, 0.75),
        "lambda-h100-sxm-x8": ("h100-sxm", 8, 23.92),
        "lambda-gh200-x1": ("gh200", 1, 1.49),
    }
    assert {oid: (o.gpu, o.gpu_count, o.plans[0].price) for oid, o in offers.items()} == expected
    a100 = offers["lambda-a100-40gb-sxm-x1"]
    # 200 GiB = 200 x 1.073741824 = 214.7 GB; 512 GiB = 549.8 GB.
    assert (a100.host_ram_gb, a100.disk_gb, a100.vcpus) == (214.7, 549.8, 30)
    assert a100.title == "gpu_1x_a100_sxm4: 1x A100 (40 GB SXM4)"
    assert a100.region is None  # the price is not per region; capacity goes to the notes
    assert "us-east-1" in a100.notes
    assert "no region had capacity" in offers["lambda-h100-sxm-x8"].notes
    assert str(a100.seen_on) == "2026-12-01"
    # The Quadro RTX 6000 is not catalogued: refused, with the closest cards named.
    (line,) = refused_lines(err)
    assert "gpu_1x_rtx6000" in line and "not in the GPU catalogue" in line
    assert "closest: rtx-6000-ada, rtx-pro-6000" in line
    assert code == 1
    assert "Imported 4 offers" in out and "1 row refused" in out


def test_vast_adapter_from_the_recorded_response(tmp_path, capsys):
    code, out, err = run(capsys, "offers", "import", str(VAST), "--catalog", str(tmp_path), *DATES)
    assert "format: vast" in out and "detected" in out
    offers = offers_in(tmp_path)
    got = {oid: (o.gpu, o.gpu_count, o.plans[0].price, o.region) for oid, o in offers.items()}
    assert got == {
        # offers 1 and 2 are both 1 x RTX 4090 in Texas: the cheaper (0.355) is kept
        "vast-ai-rtx-4090-x1-texas-us": ("rtx-4090", 1, 0.355, "Texas, US"),
        "vast-ai-rtx-4090-x2-quebec-ca": ("rtx-4090", 2, 0.802, "Quebec, CA"),
        # "A100 SXM4" with gpu_ram 81920 MB: the 80 GB card, not the 40 GB one
        "vast-ai-a100-80gb-sxm-x1-oregon-us": ("a100-80gb-sxm", 1, 1.104, "Oregon, US"),
        # "RTX 3080" with 12288 MB: the 12 GB card, not the 10 GB one
        "vast-ai-rtx-3080-12gb-x1-poland-pl": ("rtx-3080-12gb", 1, 0.091, "Poland, PL"),
        "vast-ai-h100-nvl-x1-norway-no": ("h100-nvl", 1, 2.203, "Norway, NO"),
    }
    kept = offers["vast-ai-rtx-4090-x1-texas-us"]
    # cpu_ram 128754 MB = 128.754 GB; cpu_cores_effective 12.8 -> 12 whole vCPUs
    assert (kept.host_ram_gb, kept.vcpus, kept.disk_gb) == (128.754, 12, 250)
    assert "4242002" in kept.evidence[0].source
    assert "kept the cheapest, from offer 2 (id 4242002)" in out
    (line,) = refused_lines(err)
    assert "offer 7 (id 4242007)" in line and "'Titan Xp'" in line
    assert code == 1


def test_lambda_adapter_from_a_real_recorded_response(tmp_path, capsys):
    code, out, err = run(
        capsys, "offers", "import", str(LAMBDA_RECORDED), "--catalog", str(tmp_path), *DATES
    )
    assert "format: lambda" in out and "detected" in out
    offers = offers_in(tmp_path)
    # price_cents_per_hour / 100, worked from the file: 149 -> 1.49, 3992 -> 39.92, ...
    assert {oid: (o.gpu, o.gpu_count, o.plans[0].price) for oid, o in offers.items()} == {
        "lambda-gh200-x1": ("gh200", 1, 1.49),
        "lambda-b200-x8": ("b200", 8, 39.92),
        "lambda-h100-sxm-x8": ("h100-sxm", 8, 23.92),
        "lambda-h100-pcie-x1": ("h100-pcie", 1, 2.49),
        "lambda-a100-80gb-sxm-x8": ("a100-80gb-sxm", 8, 14.32),
        "lambda-a10-x1": ("a10", 1, 0.75),
        "lambda-a100-40gb-pcie-x1": ("a100-40gb-pcie", 1, 1.29),
        "lambda-rtx-a6000-x1": ("rtx-a6000", 1, 0.80),
        "lambda-v100-16gb-x8": ("v100-16gb", 8, 4.40),
    }
    for o in offers.values():
        assert (o.plans[0].currency, o.plans[0].kind, o.plans[0].hours) == ("USD", "hourly", 1)
        assert o.region is None  # one price for every region; capacity goes to the notes
    h100 = offers["lambda-h100-sxm-x8"]
    assert "us-west-3, us-south-2, us-south-3" in h100.notes
    assert "no region had capacity" in offers["lambda-gh200-x1"].notes
    # 1800 GiB x 1.073741824 = 1932.7 GB; 22528 GiB = 24189.3 GB; 208 vCPUs.
    assert (h100.host_ram_gb, h100.disk_gb, h100.vcpus) == (1932.7, 24189.3, 208)
    assert h100.title == "gpu_8x_h100_sxm5: 8x H100 (80 GB SXM5)"
    # The Quadro RTX 6000 is not catalogued: refused in one line, closest cards named.
    (line,) = refused_lines(err)
    assert "gpu_1x_rtx6000" in line and "'RTX 6000 (24 GB)' is not in the GPU catalogue" in line
    assert "closest: rtx-6000-ada, rtx-pro-6000" in line
    assert code == 1
    assert "Imported 9 offers" in out and "1 row refused" in out


def test_a_cpu_only_lambda_type_is_left_out_with_a_note_not_refused(tmp_path, capsys):
    """Regression: the real response lists cpu_4x_general (gpu_description "N/A", specs.gpus
    0); it was refused as "gpu 'N/A' is not in the GPU catalogue", advising to add a card."""
    whole = json.loads(LAMBDA_RECORDED.read_text(encoding="utf-8"))
    only_cpu = {"data": {"cpu_4x_general": whole["data"]["cpu_4x_general"]}}
    cpu_and_a10 = {
        "data": {k: whole["data"][k] for k in ("cpu_4x_general", "gpu_1x_a10")},
    }
    src = write(tmp_path, "types.json", json.dumps(cpu_and_a10))
    code, out, err = run(capsys, "offers", "import", str(src), "--catalog", str(tmp_path), *DATES)
    assert code == 0, err
    assert refused_lines(err) == [] and "'N/A'" not in err
    assert "left out instance type 'cpu_4x_general': a CPU-only instance type" in out
    assert set(offers_in(tmp_path)) == {"lambda-a10-x1"}
    # A file of nothing but CPU types writes nothing and says why.
    src = write(tmp_path, "cpu.json", json.dumps(only_cpu))
    code, out, err = run(
        capsys, "offers", "import", str(src), "--catalog", str(tmp_path / "c2"), *DATES
    )
    assert code == 0 and refused_lines(err) == []
    assert "left out instance type 'cpu_4x_general'" in out


def test_vast_adapter_from_a_real_recorded_response(tmp_path, capsys):
    code, out, err = run(
        capsys, "offers", "import", str(VAST_RECORDED), "--catalog", str(tmp_path), *DATES
    )
    assert code == 0, err
    assert "format: vast" in out and "detected" in out
    offers = offers_in(tmp_path)
    got = {oid: (o.gpu, o.gpu_count, o.plans[0].price, o.region) for oid, o in offers.items()}
    # dph_total as recorded; gpu_ram (MiB, as nvidia-smi reports) tells the A100s apart:
    # 39936 and 40960 -> the 40 GB card, 81920 -> the 80 GB one.
    assert got == {
        "vast-ai-a100-40gb-sxm-x1-alberta-ca": (
            "a100-40gb-sxm",
            1,
            pytest.approx(0.6951851851851852),
            "Alberta, CA",
        ),
        "vast-ai-a100-40gb-sxm-x1-the-netherlands-nl": (
            "a100-40gb-sxm",
            1,
            pytest.approx(0.7493075629629633),
            "The Netherlands, NL",
        ),
        "vast-ai-a100-80gb-sxm-x1-district-of-columbia-us": (
            "a100-80gb-sxm",
            1,
            pytest.approx(1.073611111111111),
            "District of Columbia, US",
        ),
    }
    dc = offers["vast-ai-a100-80gb-sxm-x1-district-of-columbia-us"]
    # cpu_ram 171202 MB = 171.202 GB; cpu_cores_effective 12.0 -> 12; disk_space kept as is.
    assert (dc.host_ram_gb, dc.vcpus) == (171.202, 12)
    assert dc.disk_gb == pytest.approx(514.2516908081434, abs=0.05)
    assert "37431797" in dc.evidence[0].source
    assert "120568" in dc.notes  # machine_id


def test_format_can_be_given_and_a_wrong_one_is_one_line(tmp_path, capsys):
    code, out, _ = run(
        capsys,
        "offers",
        "import",
        str(VAST),
        "--format",
        "vast",
        "--catalog",
        str(tmp_path),
        *DATES,
    )
    assert code == 1 and "format: vast" in out and "given" in out
    code, _, err = run(
        capsys,
        "offers",
        "import",
        str(VAST),
        "--format",
        "lambda",
        "--catalog",
        str(tmp_path),
        *DATES,
    )
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert 'has no "data" object' in err


@pytest.mark.parametrize(
    "text, memory, gid",
    [
        ("A100 (40 GB SXM4)", None, "a100-40gb-sxm"),
        ("A100 (80 GB PCIe)", None, "a100-80gb-pcie"),
        ("H100 (80 GB SXM5)", None, "h100-sxm"),
        ("A10 (24 GB PCIe)", None, "a10"),
        ("A6000 (48 GB)", None, "rtx-a6000"),
        ("RTX 4090", None, "rtx-4090"),
        ("RTX_4090", 24.564, "rtx-4090"),
        ("RTX 3080", 10.24, "rtx-3080"),
        ("RTX 3080", 12.288, "rtx-3080-12gb"),
        ("H100 NVL", 95.83, "h100-nvl"),
        ("NVIDIA A100-SXM4-80GB", None, "a100-80gb-sxm"),
    ],
)
def test_gpu_names_match_catalogue_ids(text, memory, gid):
    assert match_gpu(load_catalog(None).gpus, text, memory).id == gid


def test_a_name_that_fits_several_cards_is_refused_with_them():
    with pytest.raises(GpuMatchError) as exc:
        match_gpu(load_catalog(None).gpus, "A100 SXM4")
    assert "a100-40gb-sxm, a100-80gb-sxm" in str(exc.value)


# ------------------------------------------------------------------------------- bad rows


def test_bad_rows_one_line_each_good_rows_kept(tmp_path, capsys):
    src = write(
        tmp_path,
        "offers.csv",
        HEADER
        + "Acme GPU,RTX 4090,1,0.44,USD,hour,EU,2026-11-30,\n"  # line 2: good
        + "Acme GPU,RTX 4099,1,0.44,USD,hour,EU,2026-11-30,\n"  # line 3: unknown GPU
        + "Acme GPU,L40S,1,,USD,hour,EU,2026-11-30,\n"  # line 4: no price
        + "Acme GPU,L40S,1,-1.5,USD,hour,EU,2026-11-30,\n"  # line 5: negative price
        + "Acme GPU,L40S,1,1.10,USD,hour,EU,30/11/2026,\n"  # line 6: not ISO
        + "Acme GPU,L40S,1,1.10,USD,fortnight,EU,2026-11-30,\n"  # line 7: billing unit
        + "Acme GPU,\x1b[2J\x1b]52;c;ZWNobyBoaQ==\x07,1,1.1,USD,hour,EU,2026-11-30,\n"  # line 8
        + "Acme \x1b[31mGPU\x1b[0m,L4,1,0.60,USD,hour,US,2026-11-30,\n",  # line 9: good, cleaned
    )
    code, out, err = run(
        capsys, "offers", "import", str(src), "--catalog", str(tmp_path), "--today", "2026-12-02"
    )
    assert code == 1
    lines = refused_lines(err)
    assert len(lines) == 6, lines
    by_line = {re.search(r"line (\d+)", x).group(1): x for x in lines}
    assert "'RTX 4099' is not in the GPU catalogue (closest: rtx-4090" in by_line["3"]
    assert "price is missing; write the price" in by_line["4"]
    assert "price -1.5 is negative" in by_line["5"]
    assert (
        "seen_on '30/11/2026' is not a date; write the date the price was seen as YYYY-MM-DD"
        in by_line["6"]
    )
    assert (
        "billing_unit 'fortnight' is not known; write one of second, minute, hour" in by_line["7"]
    )
    assert "is not in the GPU catalogue" in by_line["8"] and "\\x1b[2J" in by_line["8"]
    assert "\x1b" not in err and "\x07" not in err and "\x1b" not in out
    assert "6 rows refused" in out
    offers = offers_in(tmp_path)
    # The escape characters are shown, never kept raw: in the id, the file and the catalogue.
    assert set(offers) == {"acme-gpu-rtx-4090-x1-eu", "acme-x1b-31mgpu-x1b-0m-l4-x1-us"}
    cleaned = offers["acme-x1b-31mgpu-x1b-0m-l4-x1-us"]
    assert cleaned.provider == "Acme \\x1b[31mGPU\\x1b[0m"
    text = (tmp_path / "offers" / "acme-x1b-31mgpu-x1b-0m-l4-x1-us.toml").read_text()
    assert "\x1b" not in text


def test_a_date_after_today_and_a_bad_interconnect_are_refused(tmp_path, capsys):
    src = write(
        tmp_path,
        "o.json",
        json.dumps(
            [
                {
                    "provider": "A",
                    "gpu": "l40s",
                    "price": 1,
                    "currency": "USD",
                    "seen_on": "2027-01-01",
                },
                {
                    "provider": "A",
                    "gpu": "rtx-4090",
                    "gpu_count": 2,
                    "price": 1,
                    "currency": "USD",
                    "interconnect": "nvlink",
                    "seen_on": "2026-12-01",
                },
                {
                    "provider": "A",
                    "gpu": "rtx-4090",
                    "gpu_count": 1.5,
                    "price": 1,
                    "currency": "USD",
                    "seen_on": "2026-12-01",
                },
                {
                    "provider": ["A"],
                    "gpu": "rtx-4090",
                    "price": 1,
                    "currency": "USD",
                    "seen_on": "2026-12-01",
                },
            ]
        ),
    )
    code, _, err = run(
        capsys, "offers", "import", str(src), "--catalog", str(tmp_path), "--today", "2026-12-02"
    )
    assert code == 1
    lines = refused_lines(err)
    assert len(lines) == 4
    assert "offer 1: seen_on 2027-01-01 is after today (2026-12-02)" in lines[0]
    assert "offer 2: interconnect 'nvlink' is not a link of rtx-4090 (it has pcie)" in lines[1]
    assert "offer 3: gpu_count 1.5 is not a whole number" in lines[2]
    assert "offer 4: provider must be text or a number, got a list" in lines[3]


# ------------------------------------------------------------------- re-import, dry run


def test_reimport_replaces_instead_of_duplicating(tmp_path, capsys):
    row = "Acme GPU,RTX 4090,1,{price},USD,hour,EU,{date},\n"
    src = write(tmp_path, "o.csv", HEADER + row.format(price="0.44", date="2026-11-01"))
    assert (
        run(
            capsys,
            "offers",
            "import",
            str(src),
            "--catalog",
            str(tmp_path),
            "--today",
            "2026-12-02",
        )[0]
        == 0
    )
    write(tmp_path, "o.csv", HEADER + row.format(price="0.39", date="2026-12-01"))
    code, out, _ = run(
        capsys, "offers", "import", str(src), "--catalog", str(tmp_path), "--today", "2026-12-02"
    )
    assert code == 0 and "(replaces the earlier import)" in out
    assert sorted(p.name for p in (tmp_path / "offers").iterdir()) == [
        "acme-gpu-rtx-4090-x1-eu.toml"
    ]
    (o,) = offers_in(tmp_path).values()
    assert (o.plans[0].price, str(o.seen_on)) == (0.39, "2026-12-01")


def test_dry_run_writes_nothing(tmp_path, capsys):
    code, out, _ = run(
        capsys, "offers", "import", str(LAMBDA), "--dry-run", "--catalog", str(tmp_path), *DATES
    )
    assert code == 1
    assert "would write lambda-a10-x1" in out and "nothing written (--dry-run)" in out
    assert not (tmp_path / "offers").exists()


def test_default_target_is_the_user_catalogue(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("VRAMTUI_CONFIG_DIR", str(tmp_path / "cfg"))
    code, _, _ = run(capsys, "offers", "import", str(VAST), *DATES)
    assert code == 1
    assert (
        tmp_path / "cfg" / "catalog" / "offers" / "vast-ai-h100-nvl-x1-norway-no.toml"
    ).is_file()
    # ... and `vramtui offers` lists it with the built-ins.
    code, out, _ = run(capsys, "offers", "--today", "2026-12-02")
    assert code == 0 and "vast-ai-h100-nvl-x1-norway-no" in out


def test_seen_on_defaults_to_the_file_date_for_provider_responses(tmp_path, capsys):
    import os

    src = tmp_path / "vast.json"
    src.write_bytes(VAST.read_bytes())
    stamp = 1796000000  # 2026-11-30 (UTC), any time of day: a date no later than today
    os.utime(src, (stamp, stamp))
    code, out, _ = run(
        capsys, "offers", "import", str(src), "--catalog", str(tmp_path), "--today", "2026-12-10"
    )
    assert code == 1
    (o,) = [o for o in offers_in(tmp_path).values() if o.gpu == "h100-nvl"]
    assert str(o.seen_on) in ("2026-11-29", "2026-11-30", "2026-12-01")  # the local date
    assert "the file's modification date" in out


# ---------------------------------------------------------------- ids, limits, atomicity


def test_ids_are_bounded_and_cannot_leave_the_offers_directory(tmp_path, capsys):
    provider = "../../" + "p" * 150
    region = "../" + "r" * 150
    src = write(
        tmp_path,
        "o.csv",
        HEADER
        + f"{provider},RTX 4090,1,0.4,USD,hour,{region},2026-12-01,\n"
        + f"{provider},RTX 4090,1,0.4,USD,hour,{region}x,2026-12-01,\n",
    )
    code, _, err = run(
        capsys, "offers", "import", str(src), "--catalog", str(tmp_path), "--today", "2026-12-02"
    )
    assert code == 0, err
    names = sorted(p.name for p in (tmp_path / "offers").iterdir())
    assert len(names) == 2  # the two regions differ past the cut: a hash keeps them apart
    for name in names:
        assert re.fullmatch(r"[a-z0-9-]+\.toml", name) and len(name) <= MAX_ID_CHARS + 5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.csv", "offers"]


def test_limits_are_named(tmp_path, capsys, monkeypatch):
    long_field = write(
        tmp_path,
        "long.csv",
        HEADER + "Acme,RTX 4090,1,0.4,USD,hour," + "r" * 201 + ",2026-12-01,\n",
    )
    code, _, err = run(
        capsys,
        "offers",
        "import",
        str(long_field),
        "--catalog",
        str(tmp_path),
        "--today",
        "2026-12-02",
    )
    assert code == 1
    assert "region is 201 characters, over the import limit of 200 (MAX_FIELD_CHARS)" in err
    huge = write(tmp_path, "huge.json", json.dumps({"provider": "A"}))
    monkeypatch.setattr(import_command, "MAX_IMPORT_BYTES", 10)
    code, _, err = run(capsys, "offers", "import", str(huge), "--catalog", str(tmp_path))
    assert code == 2 and "is over 10 bytes, the reading limit" in err and "MAX_IMPORT_BYTES" in err
    monkeypatch.setattr(import_command, "MAX_IMPORT_BYTES", 2**20)
    monkeypatch.setattr(import_command, "MAX_IMPORT_ROWS", 2)
    many = write(tmp_path, "many.csv", HEADER + "Acme,RTX 4090,1,0.4,USD,hour,EU,2026-12-01,\n" * 3)
    code, _, err = run(capsys, "offers", "import", str(many), "--catalog", str(tmp_path))
    assert code == 2 and "more than 2 offers, the import limit (MAX_IMPORT_ROWS)" in err


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("missing.csv", None, "does not exist"),
        ("latin1.csv", b"provider,gpu\n\xe9\n", "is not UTF-8 text"),
        ("shape.json", b'{"hello": 1}', "JSON of no known shape"),
        ("broken.json", b'{"offers": [', "is not valid JSON"),
        ("noprice.csv", b"provider,gpu,currency,seen_on\nA,l4,USD,2026-12-01\n", "no price column"),
        ("empty.csv", b"", "is empty"),
        ("none.json", b"[]", "JSON of no known shape"),
    ],
)
def test_unreadable_files_exit_2_in_one_line(tmp_path, capsys, name, content, message):
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    code, _, err = run(capsys, "offers", "import", str(path), "--catalog", str(tmp_path))
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and message in err
    assert not (tmp_path / "offers").exists()


def test_writes_are_atomic(tmp_path, capsys, monkeypatch):
    """A failure while replacing a file keeps the earlier import whole and leaves no temp file."""
    src = write(tmp_path, "o.csv", HEADER + "Acme,RTX 4090,1,0.44,USD,hour,EU,2026-12-01,\n")
    assert (
        run(
            capsys,
            "offers",
            "import",
            str(src),
            "--catalog",
            str(tmp_path),
            "--today",
            "2026-12-02",
        )[0]
        == 0
    )
    target = tmp_path / "offers" / "acme-rtx-4090-x1-eu.toml"
    before = target.read_text()
    write(tmp_path, "o.csv", HEADER + "Acme,RTX 4090,1,0.55,USD,hour,EU,2026-12-01,\n")

    import vramtui.fsutil

    def refuse(*_):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(vramtui.fsutil.os, "replace", refuse)
    code, _, err = run(
        capsys, "offers", "import", str(src), "--catalog", str(tmp_path), "--today", "2026-12-02"
    )
    assert code == 2 and "No space left on device" in err and len(err.strip().splitlines()) == 1
    assert target.read_text() == before
    assert [p.name for p in (tmp_path / "offers").iterdir()] == [target.name]


# ------------------------------------------------------------------ price dates, staleness


def _stale_catalog(tmp_path, capsys) -> Path:
    src = write(
        tmp_path,
        "o.csv",
        HEADER
        + "Acme,RTX 4090,1,0.30,USD,hour,EU,2026-10-01,\n"  # 62 days before 2026-12-02
        + "Acme,RTX 4090,2,0.60,USD,hour,EU,2026-11-20,\n",  # 12 days before
    )
    assert (
        run(
            capsys,
            "offers",
            "import",
            str(src),
            "--catalog",
            str(tmp_path),
            "--today",
            "2026-12-02",
        )[0]
        == 0
    )
    return tmp_path


def _recheck(capsys, *extra: str) -> dict:
    code, out, _ = run(capsys, "shortlist", "--json", "--today", "2026-12-02", *extra)
    assert code == 0
    return {c["offer"]: c for c in json.loads(out)["candidates"]}


def test_stale_prices_are_flagged_in_the_json(tmp_path, capsys):
    root = _stale_catalog(tmp_path, capsys)
    got = _recheck(capsys, "--catalog", str(root))
    old, recent = got["acme-rtx-4090-x1-eu"], got["acme-rtx-4090-x2-eu"]
    assert (old["price_seen_on"], old["price_to_recheck"]) == ("2026-10-01", True)
    assert old["price_recheck_reason"] == (
        "price to re-check: seen 2026-10-01, 62 days before 2026-12-02 (more than 30)"
    )
    assert (recent["price_seen_on"], recent["price_to_recheck"]) == ("2026-11-20", False)
    # The shipped offers were seen on 2026-12-01: one day old.
    assert got["seed-rtx-4090-x1"]["price_to_recheck"] is False
    # A longer limit clears the flag; a shorter one raises it on the 12-day-old price.
    assert (
        _recheck(capsys, "--catalog", str(root), "--price-max-age", "90")["acme-rtx-4090-x1-eu"][
            "price_to_recheck"
        ]
        is False
    )
    assert (
        _recheck(capsys, "--catalog", str(root), "--price-max-age", "10")["acme-rtx-4090-x2-eu"][
            "price_to_recheck"
        ]
        is True
    )
    # The flag never changes a status or the ranking.
    lenient = _recheck(capsys, "--catalog", str(root), "--price-max-age", "90")
    assert [(c["offer"], c["status"], c["rank"]) for c in got.values()] == [
        (c["offer"], c["status"], c["rank"]) for c in lenient.values()
    ]


def test_price_max_age_from_the_config(tmp_path, capsys, monkeypatch):
    root = _stale_catalog(tmp_path, capsys)
    config = tmp_path / "cfg"
    config.mkdir()
    (config / "config.toml").write_text("price_max_age_days = 100\n")
    monkeypatch.setenv("VRAMTUI_CONFIG_DIR", str(config))
    assert (
        _recheck(capsys, "--catalog", str(root))["acme-rtx-4090-x1-eu"]["price_to_recheck"] is False
    )
    (config / "config.toml").write_text("price_max_age_days = -3\n")
    from vramtui.config import load_config

    cfg = load_config()
    assert cfg.price_max_age_days is None
    assert any("price_max_age_days must be a number of days from 0" in w for w in cfg.warnings)


def test_bad_price_max_age_is_one_line(capsys):
    code, _, err = run(capsys, "shortlist", "--price-max-age", "nan")
    assert code == 2 and "--price-max-age must be a number of days from 0" in err


def _fits(lines: list[str], columns: int) -> None:
    assert not [line for line in lines if len(line.rstrip()) > columns]
    assert not any("…" in line for line in lines)


def test_shortlist_marks_stale_prices_at_80_columns(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    root = _stale_catalog(tmp_path, capsys)
    code, out, _ = run(
        capsys,
        "shortlist",
        "--today",
        "2026-12-02",
        "--catalog",
        str(root),
        "--detail",
        "acme-rtx-4090-x1-eu",
    )
    assert code == 0
    lines = out.splitlines()
    _fits(lines, 80)
    ids = {i: re.search(r"acme-rtx-4090-x\d-eu", line) for i, line in enumerate(lines)}
    # Each candidate's cells: its title line, the id line, then three more.
    blocks = {
        m.group(0): "\n".join(lines[i - 1 : i + 3]) for i, m in ids.items() if m and "│" in lines[i]
    }
    assert "re-check price" in blocks["acme-rtx-4090-x1-eu"]
    assert "re-check price" not in blocks["acme-rtx-4090-x2-eu"]
    text = " ".join(" ".join(lines).split())
    assert "re-check price: price to re-check: seen more than 30 days ago" in text
    # --detail: the price date row
    assert re.search(r"price date\s+│ re-check\s+│ price to re-check: seen", out)


def test_offers_list_marks_samples_and_stale_prices_at_80_columns(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run(capsys, "offers", "--today", "2027-01-15")
    assert code == 0
    lines = out.splitlines()
    _fits(lines, 80)
    offers = load_catalog(None).offers
    rows = {oid: i for i, line in enumerate(lines) for oid in offers if line.startswith(oid + " ")}
    assert set(rows) == set(offers)
    order = sorted(rows.values()) + [len(lines)]
    for oid, start in rows.items():
        block = "\n".join(lines[start : order[order.index(start) + 1]])
        assert ("sample price, not a quote" in block) == oid.startswith("sample-"), oid
        assert "seen 2026-12-01" in block and "price to re-check" in block, oid
    assert "(22 offers)" in out and "45 days" not in out
    # On 2026-12-02 nothing is stale.
    code, out, _ = run(capsys, "offers", "--today", "2026-12-02")
    assert "price to re-check\n" not in out.replace(" \n", "\n") and "(0 offers;" in out


# ------------------------------------------------------------------------------------ app


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
async def test_app_shortlist_marks_samples_and_stale_prices(tmp_path):
    import dataclasses
    import datetime

    from textual.widgets import DataTable, Static

    from vramtui.app.app import VramtuiApp
    from vramtui.builtin_specs import seed_example_spec
    from vramtui.config import Config
    from vramtui.session import SizingSession

    # The shipped prices were seen on 2026-12-01: 9 days before 2026-12-10, over a 5-day limit
    # (the config's price_max_age_days reaches the app through the catalogue).
    catalog = dataclasses.replace(load_catalog(None, use_user_config=False), price_max_age_days=5)
    session = SizingSession.from_spec(
        seed_example_spec(), None, catalog, today=datetime.date(2026, 12, 10)
    )
    app = VramtuiApp(session, Config(), draft_file=tmp_path / "draft.toml")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("f6")
        for _ in range(100):
            await pilot.pause(0.05)
            if app.query_one("#tabs").active == "shortlist":
                break
        table = app.query_one("#shortlist-table", DataTable)
        costs = {
            row.key.value: str(table.get_row_at(i)[2]) for i, row in enumerate(table.ordered_rows)
        }
        assert len(costs) == len(catalog.offers)
        for oid, cost in costs.items():
            assert cost.endswith("· re-check"), (oid, cost)
            assert ("· sample" in cost) == oid.startswith("sample-"), (oid, cost)
        title = str(app.query_one("#shortlist-title", Static).content)
        assert "re-check: price seen more than 5 days ago" in title


def test_decimal_comma_infinity_and_unknown_columns(tmp_path, capsys):
    """'1,5' is refused (never read as 15); '1,234.50' is a thousands separator; an infinite
    price is refused; a column outside the schema is named once; a lone surrogate is replaced."""
    src = write(
        tmp_path,
        "o.json",
        '[{"provider": "A", "gpu": "l4", "price": "1,5", "currency": "USD", "seen_on": "2026-12-01"},'
        ' {"provider": "A", "gpu": "l40s", "price": "1,234.50", "currency": "USD",'
        '  "seen_on": "2026-12-01", "prise": 3},'
        ' {"provider": "A", "gpu": "t4", "price": 1e400, "currency": "USD", "seen_on": "2026-12-01"},'
        ' {"provider": "B\\ud800", "gpu": "t4", "price": 1, "currency": "USD", "seen_on": "2026-12-01"}]',
    )
    code, out, err = run(
        capsys, "offers", "import", str(src), "--catalog", str(tmp_path), "--today", "2026-12-02"
    )
    assert code == 1
    lines = refused_lines(err)
    assert len(lines) == 2
    assert "offer 1: price '1,5' is not a number (write decimals with a point)" in lines[0]
    assert "offer 3: price must be a finite number" in lines[1]
    assert (
        "column 'prise' is not in the import schema and was ignored (did you mean 'price'?)" in out
    )
    offers = offers_in(tmp_path)
    assert offers["a-l40s-x1"].plans[0].price == 1234.5
    assert offers["b-t4-x1"].provider == "B?"
