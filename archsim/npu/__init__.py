"""archsim.npu"""
