"""Fitted alpha-beta models: typed, predictable, reportable, saved as versioned JSON.

A model file is JSON, never pickle::

    {"schema": "pybench.model", "schema_version": 1, "models": [ {...}, ... ]}

One file may hold several models (one per collective / backend / link class / world
size). :func:`load_models` returns all of them; :func:`load_model` returns one, chosen
by optional filters, and refuses to guess when several match.

Uncertainty: ``predict`` returns the 95% confidence band of the fitted line (from the
parameter covariance and Student's t), i.e. where the *mean* time lies, not where one
noisy run will land. At a world size other than the fitted one, each piece is mapped to
per-link (alpha, B) through the algorithm formula (see :mod:`pybench.model.algorithms`) and
back out at the new world; the band is scaled the same way. The sizes where pieces
change are kept as measured (a protocol switch point at another world size is unknown).

Every piece has alpha >= 0 and B > 0 (the fit is constrained, see :mod:`pybench.model.fit`)
and the world-size factors are positive, so every predicted time is positive. Files
from before that constraint that hold a negative latency are refused on load, with the
remedy (refit).
"""


from pybench.model.build import fit_model, fit_models
from pybench.model.model_files import load_model, load_models, models_from_document, models_to_document, save_models
from pybench.model.piecewise_model import AlphaBetaModel, Prediction

__all__ = ["AlphaBetaModel", "Prediction", "fit_model", "fit_models", "load_model", "load_models",
           "models_from_document", "models_to_document", "save_models"]
