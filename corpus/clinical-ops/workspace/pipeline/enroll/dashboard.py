"""Render the weekly dashboard and post a summary to the study channel."""
import argparse
import os
import pathlib

import pandas as pd
import plotly.express as px
import requests
import yaml

from . import transform

CFG = yaml.safe_load(open(pathlib.Path(__file__).with_name("config.yaml")))


def build(week: str) -> pathlib.Path:
    exp = pathlib.Path(CFG["paths"]["exports"]) / week
    status = pd.read_csv(exp / "subject-status.csv", dtype=str)
    enr = transform.enrollment(status)
    fig = px.bar(enr.reset_index(), x="site_id", y="randomised", title=f"AUR-204 enrollment {week}")
    out = pathlib.Path(CFG["paths"]["dashboard"]) / f"dashboard-{week}.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.write_html(out)
    return out


def notify(text: str) -> None:
    requests.post(os.environ["TEAMS_WEBHOOK_URL"], json={"text": text}, timeout=30)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--week", required=True)
    print(build(ap.parse_args().week))
