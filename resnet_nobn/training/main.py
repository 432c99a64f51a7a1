"""The training entry points' main (run/cifar_train.py, run/imagenet_train.py): the parsed flags
become one configuration, checked with TF_CONFIG and the timeouts and against the run directory
(read once, the start decided: resume.py) before TensorFlow loads, then one training run
(resnet_nobn/training/trainer.py). The flags themselves: resnet_nobn/cli.py.
"""
import gc

from absl import flags

from resnet_nobn import cli
from resnet_nobn.console import quiet_stderr
from resnet_nobn.training import cluster, resume, rundir, tf_config
from resnet_nobn.training.run_lines import closing_line


def run():
    """Runs the entry point whose flags cli.define_flags made (absl parses them, then `main`)."""
    cli.start(main)


def main(argv):
    """absl main of run/*.py: the flags were parsed; here they become a config, once, and are
    checked, before TensorFlow is loaded; then one training run."""
    from absl import logging
    logging.set_verbosity(logging.ERROR)  # absl warnings of tfds and TensorFlow: errors are ours

    def configure_and_train():
        cfg = cli.config_from_flags(flags.FLAGS)
        tf_config.timeouts()  # RESNET_NOBN_*_TIMEOUT checked on every run, TF_CONFIG or not
        plan = None
        if cluster.wants_multi_worker(cfg.strategy):
            tf_config.this_task()  # TF_CONFIG and this task's port: said before TensorFlow loads
        else:  # the run directory read once; a finished run re-run is said at once, nothing built
            run = rundir.read(cfg.model_dir)
            if cfg.eval_only or run.config is not None or run.config_unreadable:
                plan = resume.decide(run, cfg)  # a run of other settings: refused here already
                if plan.action == resume.FINISHED:
                    print(resume.finished_line(plan, cfg), flush=True)
                    return
        with quiet_stderr():  # TensorFlow's start-up lines (CUDA probing, absl's log banner)
            import tensorflow as tf
            from resnet_nobn.training import trainer
            cluster.probe_devices()
        tf.get_logger().setLevel("ERROR")  # deprecation notices of tf.distribute internals
        try:
            if trainer.train(cfg, plan=plan) is not None:  # the chief's results
                print(closing_line(cfg.model_dir), flush=True)
        finally:
            # Python's exit would walk every object TensorFlow made, module by module, to collect
            # garbage nothing reads any more: seconds of silence after the last line (4 s of a
            # tiny run's on a busy 2-core machine). Every file of the run is written and closed.
            gc.freeze()

    cli.main_wrapper(configure_and_train)
