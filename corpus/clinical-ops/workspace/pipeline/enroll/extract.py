"""Download the weekly subject-status export from the EDC's web services."""
import argparse
import os
import pathlib

import requests
import yaml

CFG = yaml.safe_load(open(pathlib.Path(__file__).with_name("config.yaml")))


def fetch(week: str) -> pathlib.Path:
    url = f"{CFG['edc']['base_url']}/studies/{CFG['edc']['study']}/datasets/subject_status.csv"
    auth = (os.environ["RAVE_USER"], os.environ["RAVE_PASSWORD"])
    r = requests.get(url, auth=auth, timeout=60)
    r.raise_for_status()
    out = pathlib.Path(CFG["paths"]["exports"]) / week / "subject-status.csv"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(r.content)
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--week", required=True)
    print(fetch(ap.parse_args().week))
