"""Enrollment and query metrics from the pseudonymised export."""
import pandas as pd

PLANNED = 240


def enrollment(df: pd.DataFrame) -> pd.DataFrame:
    """Randomised and screening counts per site."""
    rnd = df[df.status == "randomised"].groupby("site_id").size().rename("randomised")
    scr = df[df.status == "screening"].groupby("site_id").size().rename("screening")
    out = pd.concat([rnd, scr], axis=1).fillna(0).astype(int)
    out["pct_of_plan"] = (out.randomised / PLANNED * 100).round(1)
    return out


def query_ageing(q: pd.DataFrame) -> pd.DataFrame:
    """Open queries by age bucket and site."""
    q = q[q.status == "open"].copy()
    q["bucket"] = pd.cut(q.age_days, [0, 14, 30, 60, 10_000], labels=["<14", "14-30", "30-60", ">60"])
    return q.groupby(["site_id", "bucket"], observed=True).size().unstack(fill_value=0)
