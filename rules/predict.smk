# Predicting larger clusters from the measured tables (distbench.predict.model, .tables): alpha-beta fits, their
# check against the larger measured world sizes, collective times and training scaling at
# predict.gpu_counts GPUs with the inter-node link of predict.preset.


rule predict:
    input:
        unpack(table_input("training_summary")),
        comm=results("tables/comm_summary.csv"),
    output:
        fits=report(
            results("tables/predict/alpha_beta.csv"),
            caption="../workflow/report/predict_alpha_beta.rst",
            category="Tables",
            subcategory="Prediction",
        ),
        comm=report(
            results("tables/predict/prediction_comm.csv"),
            caption="../workflow/report/predict_comm.rst",
            category="Tables",
            subcategory="Prediction",
        ),
        training=report(
            results("tables/predict/prediction_training.csv"),
            caption="../workflow/report/predict_training.rst",
            category="Tables",
            subcategory="Prediction",
        ),
        validation=report(
            results("tables/predict/prediction_validation.csv"),
            caption="../workflow/report/predict_validation.rst",
            category="Tables",
            subcategory="Prediction",
        ),
    log:
        results("logs/predict/predict.log"),
    localrule: True
    conda:
        "../envs/distbench.yaml"
    threads: SIDE_THREADS
    params:
        preset=config["predict"]["preset"],
        gpu_counts=config["predict"]["gpu_counts"],
    script:
        "../workflow/scripts/predict.py"


rule plot_predict:
    input:
        validation=results("tables/predict/prediction_validation.csv"),
        comm=results("tables/predict/prediction_comm.csv"),
        training=results("tables/predict/prediction_training.csv"),
    output:
        report(
            directory(results("figures_predict")),
            patterns=["{figure}.png"],
            caption="../workflow/report/predict_figures.rst",
            category="Prediction",
            labels={"figure": "{figure}"},
        ),
    log:
        results("logs/plot/predict.log"),
    localrule: True
    conda:
        "../envs/distbench.yaml"
    threads: SIDE_THREADS
    script:
        "../workflow/scripts/plot_predict.py"
