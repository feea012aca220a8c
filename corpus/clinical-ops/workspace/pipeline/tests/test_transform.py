import pandas as pd

from enroll import transform


def test_enrollment_counts_randomised_per_site():
    df = pd.DataFrame({"site_id": ["101", "101", "102"], "status": ["randomised", "screening", "randomised"]})
    out = transform.enrollment(df)
    assert out.loc["101", "randomised"] == 1
    assert out.loc["101", "screening"] == 1


def test_query_ageing_buckets():
    q = pd.DataFrame({"site_id": ["201", "201"], "age_days": [5, 52], "status": ["open", "open"]})
    out = transform.query_ageing(q)
    assert out.loc["201", "<14"] == 1
