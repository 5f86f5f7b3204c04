"""The prediction of larger clusters, as the workflow and the report see it (distbench.core.manifest)."""

from distbench.core.manifest import Figures, PackageManifest, Step, Table, TableRef, config_flag, register

MANIFEST = register(PackageManifest(
    name="predict",
    order=50,
    active=config_flag("predict", "enabled"),
    tables=(
        Table("prediction_validation", "tables/predict/prediction_validation.csv",
              caption="report/predict_validation.rst", subcategory="Prediction"),
        Table("prediction_comm", "tables/predict/prediction_comm.csv", report=False,
              caption="report/predict_comm.rst", subcategory="Prediction"),
        Table("prediction_training", "tables/predict/prediction_training.csv", report=False,
              caption="report/predict_training.rst", subcategory="Prediction"),
        Table("alpha_beta", "tables/predict/alpha_beta.csv", report=False, caption="report/predict_alpha_beta.rst",
              subcategory="Prediction"),
    ),
    figures=(Figures("figures_predict", caption="report/predict_figures.rst", category="Prediction"),),
    steps=(
        # the measured collectives (any family's summary by table name) and training scaling, when measured
        Step("predict", "distbench.predict.steps:predict",
             inputs={"training_summary": TableRef("training_summary", optional=True),
                     "comm": TableRef("comm_summary"), "env": "probe/env.json"},
             outputs={"fits": "alpha_beta", "comm": "prediction_comm", "training": "prediction_training",
                      "validation": "prediction_validation"},
             params={"preset": "distbench.predict.steps:preset", "gpu_counts": "distbench.predict.steps:gpu_counts"}),
        Step("plot_predict", "distbench.predict.steps:plot",
             inputs={"validation": TableRef("prediction_validation"), "comm": TableRef("prediction_comm"),
                     "training": TableRef("prediction_training")},
             outputs={"figures": "figures_predict"}),
    ),
    sections={"body": ("distbench.predict.section:PREDICTION",)},
    package_data=("templates/*.j2", "config.schema.yaml", "report/*.rst"),
    schema="config.schema.yaml",
    config_check="distbench.predict.hooks:config_check",
))
