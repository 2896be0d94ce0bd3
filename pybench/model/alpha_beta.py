"""Fitted alpha-beta models: typed, predictable, reportable, saved as versioned JSON.

A model file is JSON, never pickle::

    {"schema": "pybench.model", "schema_version": 1, "models": [ {...}, ... ]}

One file may hold several models (one per collective / backend / link class / world
size). :func:`load_models` returns all of them; :func:`load_model` returns one, chosen
by optional filters, and refuses to guess when several match.

Each model is the measured curve of one sweep (its layout: collective, backend, link class, world
size, element type); it carries its collective's topology model from the same file, which answers
for every other layout (:mod:`pybench.model.topology`), so ``load_model(...).predict(size, world=64)``
takes the same path as ``pybench predict --world 64``. A curve without one refuses other layouts in
one line that says how to refit. ``predict`` returns a 95% prediction interval by default (where
one new measurement should land: the interval that is validated, docs/model-validation.md).

Every piece has alpha >= 0 and B > 0 (the fit is constrained, see :mod:`pybench.model.fit`), so
every predicted time is positive. Files from before that constraint that hold a negative latency
are refused on load, with the remedy (refit).
"""


from pybench.model.build import fit_model, fit_models
from pybench.model.model_files import load_model, load_models, models_from_document, models_to_document, save_models
from pybench.model.piecewise_model import AlphaBetaModel, Prediction

__all__ = ["AlphaBetaModel", "Prediction", "fit_model", "fit_models", "load_model", "load_models",
           "models_from_document", "models_to_document", "save_models"]
