"""The back-test engine of ``ghs backtest`` (see :mod:`ghs.backtest.engine`)."""

from ghs.backtest.engine import (
    DEFAULT_PREDICTOR,
    PARALLEL_PREDICTORS,
    PREDICTORS,
    BacktestSettings,
    run_backtest,
    summarise,
)
from ghs.backtest.world import BacktestError

__all__ = ["DEFAULT_PREDICTOR", "PARALLEL_PREDICTORS", "PREDICTORS", "BacktestError",
           "BacktestSettings", "run_backtest", "summarise"]
