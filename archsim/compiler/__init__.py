"""archsim.compiler"""
