"""The back-test engine of ``ghs backtest`` (see :mod:`ghs.backtest.engine`)."""

from ghs.backtest.engine import BacktestSettings, run_backtest
from ghs.backtest.scoring import (
    DEFAULT_PREDICTOR,
    PARALLEL_PREDICTORS,
    PREDICTORS,
    RECOMBINED,
    summarise,
)
from ghs.backtest.world import BacktestError

__all__ = ["DEFAULT_PREDICTOR", "PARALLEL_PREDICTORS", "PREDICTORS", "RECOMBINED",
           "BacktestError", "BacktestSettings", "run_backtest", "summarise"]
